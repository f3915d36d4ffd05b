from django.http import HttpRequest


def navigation(request: HttpRequest) -> dict[str, object]:
    return {}
