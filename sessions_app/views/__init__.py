"""Views, one module per area: sessions (list, page, upload), timeline, runs (preview, runs, reviews), diagnosis."""
