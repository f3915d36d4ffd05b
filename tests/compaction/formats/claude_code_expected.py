"""What the parser must find in each Claude Code sample: calls on the main chain and on the side, the peak
context of each, compactions (trigger, tokens before) and microcompacts (trigger, tokens before, tokens saved,
tool results cleared).

SOURCES.md counts the side over ``isSidechain`` lines; we count every subagent, so a sample whose subagents are known
only from the ``agent_progress`` copies its main file carries (inline subagents) has their calls and peak on the side
here (docs/formats/claude-code.md, "Inline subagents"), where SOURCES.md says 0."""

from __future__ import annotations

Compactions = list[tuple[str, int]]
Microcompacts = list[tuple[str, int, int, int]]

EXPECTED: dict[str, tuple[int, int, int, int, Compactions, Microcompacts]] = {
    "entirecli_a6e4c2a0fbd1-0_full.jsonl": (12, 0, 154_992, 0, [("auto", 155250)], []),
    "entirecli_4b7d5121b42a-0_full.jsonl": (40, 0, 153_738, 0, [("manual", 153739)], []),
    "entirecli_7662d755ef9f-2_full.jsonl": (49, 0, 154_764, 0, [("auto", 155068)], [("auto", 60888, 21091, 42)]),
    "entirecli_f9f6f611b469-0_full.jsonl": (71, 0, 150_210, 0, [("auto", 176700)], [("auto", 78208, 38535, 29)]),
    "entirecli_a5d8ec9bae67-0_full.jsonl": (227, 0, 153_433, 0, [("auto", 155066), ("auto", 162548)], []),
    "entirecli_ada8171575ce-0_full.jsonl": (47, 20, 108_926, 88_847, [], []),  # inline subagent a683f63
    "entirecli_adac80fffbb8-0_full.jsonl": (56, 0, 75_264, 0, [], []),
    "entirecli_1e868c83dbb7-0_full.jsonl": (20, 0, 60_660, 0, [], []),
    "entirecli_4c02af2759b6-0_full.jsonl": (1, 0, 38_395, 0, [], []),
    "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl": (217, 4, 141_787, 139_534, [("manual", 142431)], []),
    "spotter_short.jsonl": (1, 0, 25_353, 0, [], []),
    "spotter_tool_heavy.jsonl": (4, 0, 27_666, 0, [], []),
    "entireskills_1f64c84a8821-0_raw_transcript.jsonl": (10, 0, 56_321, 0, [], []),
    "entireskills_4982335ad847-0_raw_transcript.jsonl": (90, 0, 325_602, 0, [], []),
    # inline subagents a2ffcc6 (10 calls) and af26473 (6)
    "cipherbox_c644f3afc869-1_full.jsonl": (82, 16, 132_151, 45_889, [("manual", 132627)], []),
    "agentv_1ed266d094ed-1_full.jsonl": (11, 0, 56_950, 0, [], []),
    "ccviewer_fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl": (9, 161, 21_552, 42_726, [], []),
    "ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": (10, 10, 26_080, 19_698, [], []),
    "sniffly_d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl": (62, 0, 105_848, 0, [], []),
    "sniffly_ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl": (0, 0, 0, 0, [], []),
}
