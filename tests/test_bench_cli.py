"""`editspec bench` on one small case: it runs, and its JSON has the documented shape."""

import json

from click.testing import CliRunner

from editspec.cli import EXIT_INPUT, main

CASE = {
    "id": 1,
    "name": "toy",
    "before": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "instruction_descriptive": "Add type hints for int arguments and results.",
}


def test_bench_writes_the_documented_json(tmp_path):
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(CASE) + "\n")
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(
        main,
        [
            "bench",
            "--data",
            str(data),
            "--limit",
            "1",
            "--methods",
            "plain,editspec_plain,editspec_lookup",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report) >= {"cases", "summary", "story", "limit"}
    assert set(report["summary"]) == {"plain", "editspec_plain", "editspec_lookup"}
    for entry in report["summary"].values():
        assert entry["median_speedup_vs_plain"] > 0 and entry["median_tokens_per_s"] > 0
    case = report["cases"][0]["methods"]
    for m in case.values():
        assert {
            "tokens",
            "seconds",
            "tokens_per_s",
            "target_passes",
            "accepted",
            "drafted",
            "same_as_plain",
        } <= set(m)
    assert case["plain"]["speedup_vs_plain"] == 1.0
    # Our plain decoding is llama-cpp-python's plain decoding, token for token.
    assert case["editspec_plain"]["same_as_plain"] is True
    assert case["editspec_lookup"]["accepted"] <= case["editspec_lookup"]["drafted"]
    assert report["limit"] >= 1.0
    assert "editspec_lookup" in result.output


def test_bench_without_data_says_where_to_look(tmp_path):
    result = CliRunner().invoke(main, ["bench", "--data", str(tmp_path / "none.jsonl")])
    assert result.exit_code == EXIT_INPUT
    assert "--data" in result.output
