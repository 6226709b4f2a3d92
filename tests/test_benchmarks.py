"""The benchmarks' own arithmetic and outputs, on small synthetic rows."""

import argparse
import json
import random

import pytest

from benchmarks import stream
from benchmarks._common import compare, mean_ci, plots, stage_markdown, stage_totals, summarize, table


def rows(n, seed, hits=False):
    rng = random.Random(seed)
    return [
        {
            "time_s": rng.uniform(0.1, 1),
            "samples": rng.randint(100, 5000),
            "queries": rng.randint(50, 4000),
            "prompt_tokens": rng.randint(1000, 9000),
            "completion_tokens": 10,
            "fresh_precision": rng.uniform(0.9, 1),
            "coverage": rng.uniform(0, 1),
            "length": rng.randint(0, 5),
            "memory_hit": hits and i % 2 == 1,
            "memory_size": i // 2,
            "memory_lookup_s": rng.uniform(0, 0.002),
            "rss_mb": 500.0 + i,
        }
        for i in range(n)
    ]


def test_mean_ci():
    mean, half = mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(1.96 * 1.0 / 3**0.5)
    assert "| x | 2 |" in table(summarize([{"x": 1}, {"x": 3}], ["x"]), "t")


def test_compare_uses_the_papers_definitions():
    a, m = rows(30, 1), rows(30, 2, hits=True)
    out = compare(a, m, "gpt-4o-mini")
    assert out["speedup"] == pytest.approx(sum(r["time_s"] for r in a) / sum(r["time_s"] for r in m))
    assert out["sampling_reduction"] == pytest.approx(1 - sum(r["samples"] for r in m) / sum(r["samples"] for r in a))
    assert out["memory_hits"] == 15
    assert out["anchors"]["usd_at_gpt-4o-mini"].startswith("0.")
    args = argparse.Namespace(classifier="rf", tau_sim=None, tau_mid=0.8, pooling="words", price_model="gpt-4o-mini")
    text = stream.markdown({"guided": out, "paper": compare(a, rows(30, 3, hits=True), "gpt-4o-mini")}, args, 30)
    assert f"| speedup (Σ time) |  | {out['speedup']:.2f}× |" in text
    assert f"| sampling reduction |  | {out['sampling_reduction']:.0%} |" in text
    assert "| MAnchors (guided, τ_sim 0.4) | MAnchors (paper, τ_sim 0.6) |" in text
    below = sum(r["fresh_precision"] < 0.95 for r in m) / 30
    assert f"| {out['anchors']['below_tau']['mean']:.3f}" in text and out["manchors"]["below_tau"]["mean"] == below


def test_stage_table_sums_samples_and_queries_per_stage():
    a = [{"stages": {"root": {"samples": 100, "queries": 90}, "round-1": {"samples": 300, "queries": 300}}},
         {"stages": {"root": {"samples": 100, "queries": 80}, "round-4": {"samples": 50, "queries": 10},
                     "verify-4": {"samples": 20, "queries": 20}}}]  # fmt: skip
    totals = stage_totals(a)
    assert list(totals) == ["root", "round 1", "rounds 3+", "verification"]
    assert totals["root"] == {"samples": 200, "queries": 170}
    text = stage_markdown({"A": a})
    assert "| root | 100 (35%) | 85 |" in text and "| total | 285 (100%) | 250 |" in text


def test_tuning_stream_leaves_out_the_reported_stream():
    texts = [f"sentence number {i}" + " word" * (i % 15) for i in range(400)]
    args = argparse.Namespace(max_words=12, shuffle_seed=42, n=100, tuning=False)
    reported = stream.stream_order(texts, args, held_out=100)
    args.tuning = True
    tuning = stream.stream_order(texts, args, held_out=100)
    assert len(reported) == len(tuning) == 100 and not set(reported) & set(tuning)
    assert all(len(texts[i].split()) <= 12 for i in reported + tuning)


def pixels(path):
    """A PNG's pixels: a picture, not an empty canvas."""
    import numpy as np
    from PIL import Image

    image = np.asarray(Image.open(path).convert("L"), dtype=float)
    assert image.shape[0] >= 300 and image.shape[1] >= 400 and image.std() > 10, path
    return image


def test_plots_and_heatmaps_draw_their_data(tmp_path):
    import numpy as np

    a, m = rows(12, 3), rows(12, 4, hits=True)
    paths = plots(a, m, "t", out=tmp_path)
    grid = {(s, mm): compare(a, m, "gpt-4o-mini") for s in (0.5, 0.6) for mm in (0.7, 0.8)}
    paths.append(stream.heatmaps(grid, "t", out=tmp_path))
    drawn = [pixels(path) for path in paths]
    other = plots(a, rows(12, 9, hits=True), "t", out=tmp_path / "other")  # other numbers, other pictures
    assert all(not np.array_equal(x, pixels(y)) for x, y in zip(drawn, other, strict=False))


def test_growth_windows_cover_the_stream():
    m = rows(25, 5, hits=True)
    table = stream.growth(m, every=10)
    assert [g["inputs"] for g in table] == [10, 20, 25]
    assert [g["memory_size"] for g in table] == [4, 9, 12]
    last = m[20:]
    assert table[-1]["lookup_ms_mean"] == pytest.approx(1000 * sum(r["memory_lookup_s"] for r in last) / 5)
    assert table[-1]["hit_rate"] == pytest.approx(sum(r["memory_hit"] for r in last) / 5)
    assert table[-1]["rss_mb"] == 524.0
    assert stream.growth_markdown(table).count("\n") == 4


def test_growth_plot_is_written(tmp_path):
    path = stream.growth_plot(stream.growth(rows(12, 6, hits=True), every=4), "t", out=tmp_path)
    pixels(path)


def test_results_go_to_a_folder_a_fresh_checkout_does_not_have(tmp_path, monkeypatch):
    # benchmarks/results is not in git: a stream's figures made it themselves, or its rows were lost.
    from benchmarks import _common

    monkeypatch.setattr(_common, "RESULTS", tmp_path / "results")
    figure = stream.growth_plot(stream.growth(rows(12, 6, hits=True), every=4), "t")
    written = plots(rows(12, 3), rows(12, 4, hits=True), "t", out=tmp_path / "elsewhere" / "deeper")
    assert figure.parent == tmp_path / "results" and figure.exists()
    assert all(p.parent == tmp_path / "elsewhere" / "deeper" and p.exists() for p in written)
    assert _common.write_json("t", {}).parent == tmp_path / "results"


@pytest.mark.slow
def test_tabular_and_image_benchmarks_run_end_to_end(tmp_path, monkeypatch, capsys):
    from benchmarks import _common, image, tabular

    monkeypatch.setattr(_common, "RESULTS", tmp_path)
    tabular.main(["--models", "rf", "--n", "3", "--fresh-samples", "100"])
    image.main(["--n", "3", "--fresh-samples", "100"])
    out = capsys.readouterr().out
    assert "| random forest (50 trees) |" in out and "| MAnchors |" in out
    written = {p.name for p in tmp_path.iterdir()}
    assert {"tabular_adult_n3.json", "image_digits_n3.json", "image_digits_n3_anchors.png"} <= written
    assert "tabular_adult_rf_n3_cumulative.png" in written


def test_server_memory_prompts_are_distinct_perturbations():
    from benchmarks import server_memory

    prompts = server_memory.perturbations(60)
    assert len(prompts) == len(set(prompts)) == 60 and sum("UNK" in p for p in prompts) > 50
    row = {"prompts_per_s": 20.0, "rss_start_mb": 400.0, "rss_end_mb": 900.0, "rss_peak_mb": 950.0}
    assert "| 256 MiB | 20.0 | 400 | 900 | 950 |" in server_memory.markdown({"256 MiB": row})


def test_the_claims_benchmark_counts_the_false_claims_of_a_flat_null_through_the_explainers_search(capsys):
    from benchmarks import claims

    out = claims.run("anchors", "strict", None, seeds=3, first_seed=0, n_features=6)
    assert out["p0"] == pytest.approx(0.949) and out["bound"] == 0.95 and out["delta"] == 0.1
    assert 0 <= out["false_rate"] <= 1 and out["samples"] > 0 and out["rules_sampled"] >= 1
    assert claims.run("anchors", "default", 0.5, seeds=3, first_seed=0, n_features=6)["false_rate"] == 0.0
    document = claims.run("manchors", "default", 0.5, seeds=2, first_seed=0, n_features=5, document=True)
    assert document["document"] and document["false_rate"] == 0.0 and document["samples"] > 0
    claims.main(["--explainer", "manchors", "--seeds", "2", "--features", "5", "--json"])
    line = json.loads(capsys.readouterr().out)
    assert {"false_rate", "se", "delta"} <= set(line) and line["explainer"] == "manchors"


def test_the_documents_benchmark_explains_articles_and_summarizes_the_targets(tmp_path, monkeypatch, capsys):
    from benchmarks import _common, documents

    monkeypatch.setattr(_common, "RESULTS", tmp_path)
    documents.main(["bbc", "--split", "val", "--n", "3", "--explainers", "manchors", "--fresh-samples", "100"])
    out = capsys.readouterr().out
    assert "| manchors | 3 |" in out
    written = json.loads((tmp_path / "documents_bbc_val_n3.json").read_text())
    rows = written["runs"]["manchors"]["rows"]
    assert len(rows) == 3 and all(r["level"] in documents.LEVELS and 0 <= r["fresh_precision"] <= 1 for r in rows)
    assert all((r["coarse_length"] is not None) == (r["level"] == "words in sentences") for r in rows)


def test_curve_texts_have_the_words_asked_for():
    from benchmarks.documents import texts_of_length
    from llm_anchors.samplers.words import WORD

    for mixed in (False, True):
        texts = texts_of_length(300, 3, None, mixed)
        assert len(texts) == 3 and all(len(WORD.findall(t)) == 300 for t, _ in texts)
    assert len({topic for _, topic in texts_of_length(30, 3, None)}) == 3


def test_the_power_floor_and_a_short_run():
    import math

    from benchmarks import power
    from llm_anchors import SearchParams

    default, strict = SearchParams(), SearchParams(certify="strict")
    assert power.floor(default) == 22 and power.floor(strict) == 45  # at all of δ = 0.1: bounds 0.9, 0.95
    assert power.floor(default, rank=1) > power.floor(default)  # a share is less than δ
    # At the anchor's own precision (Wald's bound): more samples as it nears the bound, none can at or below it.
    assert power.floor(default, 1, 0.95) > power.floor(default, 1, 0.99) > power.floor(default, 1, 1.0)
    assert power.floor(strict, 1, 0.95) == math.inf and power.floor(default, 1, 0.89) == math.inf
    row = power.run("manchors", "default", seeds=5, n_features=12)
    assert 0.0 <= row["exact_pair"] <= 1.0 and row["queries"] > row["floor_at_delta"]
    assert row["certifying_median"] >= row["floor_median"]  # no certificate below its own floor


def test_a_certified_jump_is_reduced_to_the_words_it_needs_though_a_needless_one_sits_between_them():
    from benchmarks import power
    from llm_anchors import FunctionClassifier, MAnchorsExplainer

    # Seed 129: the pair is words 7 and 10, and the fit ranks word 15 between them, so growth's first
    # rule tested holds all three in the order (7, 15, 10): no prefix of it is the pair. The jump is
    # certified, then reduced: {7, 15} was passed over, {7, 10} (15 dropped) is tested and certified.
    e = MAnchorsExplainer(FunctionClassifier(lambda t: ["pos"] * len(t), name="power"))
    result, pair = power.one(e, 129, 20)
    assert pair == {7, 10} and result.rule == pair and result.success
    assert [[b.order for b in r.beam] for r in result.rounds] == [[(7, 15, 10)], [(7, 10)]]


@pytest.mark.parametrize("argv", [["--seeds", "0"], ["--features", "1"]])
def test_the_power_benchmark_refuses_what_it_cannot_measure(argv, capsys):
    from benchmarks import power

    with pytest.raises(SystemExit) as exit_:
        power.main(argv)
    assert exit_.value.code == 2 and "--seeds must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        power.main(["--precision", "1.5"])
    assert exit_.value.code == 2 and "--precision must lie in" in capsys.readouterr().err
    # Not a SearchParams field, not a number, a value SearchParams refuses: each refused before anything runs.
    for bad in ("refutation=0.7", "refute=high", "patience=0.5"):
        with pytest.raises(SystemExit) as exit_:
            power.main(["--set", bad])
        assert exit_.value.code == 2 and "--set takes NAME=VALUE" in capsys.readouterr().err


def test_the_memorys_ceiling_proposes_the_known_anchor_first_and_pays_only_its_certificate(tmp_path):
    import asyncio

    from benchmarks.ceiling import as_rule, oracle, oracle_answers
    from llm_anchors import FunctionClassifier, MAnchorsExplainer
    from tests.conftest import needs_all

    text = "this is a good and great movie with a fine plot overall"

    async def explain(**kw):
        clf = FunctionClassifier(needs_all("good", "great"), name="good-and-great")
        async with MAnchorsExplainer(clf, seed=0, memory=None, **kw) as explainer:
            return await explainer.explain(text)

    alone = asyncio.run(explain())
    assert sorted(alone.data.anchor) == ["good", "great"]
    told = asyncio.run(explain(proposers=[oracle({text: ["great", "good"]})]))
    assert sorted(told.data.anchor) == ["good", "great"] and told.meta.queries < alone.meta.queries
    assert "oracle" in told.meta.stages  # its tests are counted under its name
    assert as_rule(["good", "nowhere"], text.split()) is None
    rows = [{"text": t, "label": 1, "anchor": a} for t, a in [("a b", ["a"]), ("a c", ["a"]), ("d", [])]]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": {"manchors": [{"rows": rows}]}}))
    assert oracle_answers(path) == {"a b": ["a"], "a c": ["a"]}
    assert oracle_answers(path, seen_only=True) == {"a c": ["a"]}


def test_growth_told_the_anchors_length_tests_no_shorter_rule_and_stops_at_its_first_certificate():
    import asyncio

    from benchmarks.ceiling import told_length
    from llm_anchors import FunctionClassifier, MAnchorsExplainer
    from tests.conftest import needs_all

    text = "this is a good and great movie with a fine plot overall"

    async def explain(**kw):
        clf = FunctionClassifier(needs_all("good", "great"), name="good-and-great")
        async with MAnchorsExplainer(clf, seed=0, memory=None, **kw) as explainer:
            return await explainer.explain(text)

    told = asyncio.run(explain(proposers=[told_length({text: ["x", "y", "z"]})]))
    assert len(told.data.anchor) == 3 and {"good", "great"} <= set(told.data.anchor)  # certified first: final
    assert not [s for s in told.meta.stages if s.endswith("-2")]  # no rule shorter than told was tested
    alone = asyncio.run(explain(proposers=[told_length({"another text": ["good"]})]))
    assert sorted(alone.data.anchor) == ["good", "great"] and "growth-2" in alone.meta.stages


def test_a_measuring_devices_file_is_read_before_the_stream_runs(tmp_path, capsys):
    from benchmarks import stream

    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for argv in (
        ["--told-length", str(bad)],
        ["--oracle", str(bad)],
        ["--oracle", str(bad), "--told-length", str(bad)],
    ):
        with pytest.raises(SystemExit) as exit_:
            stream.main(argv)
        assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "cannot read the anchors of" in err and "not allowed with argument" in err


def test_the_bet_benchmark_measures_the_certifier_unconditionally():
    """A rule that keeps the label on every sample is always certified, at or above its floor; one whose
    precision is below the bound at most at its share of δ (Ville), with no floor to compare."""
    from benchmarks import bet
    from llm_anchors import SearchParams

    sure = bet.cell(SearchParams(), 1.0, 2, runs=20)
    assert sure["certified"] == 1.0 and sure["certificate_median"] >= sure["floor"] and sure["spent_over_floor"] >= 1
    from llm_anchors.search import share_of

    below = bet.cell(SearchParams(), 0.85, 2, runs=400)
    assert below["certified"] <= share_of(0.1, 2, 0.2) and below["spent_mean"] > 0 and below["spent_over_floor"] is None


def test_the_spend_tally_splits_a_searchs_samples_by_what_became_of_each_rule():
    from benchmarks.spend import Tally
    from llm_anchors.propose import Growth, GuidedSearch
    from llm_anchors.search import SearchParams
    from llm_anchors.search.base import Search
    from tests.conftest import pool, run_search

    original = Search._certify
    with Tally().installed() as tally:
        search = GuidedSearch(12, pool(12), SearchParams(), proposers=[Growth()])
        result, batches = run_search(search, lambda present: present[:, [1, 4]].all(axis=1))
    assert Search._certify is original  # put back
    table = tally.per_search()
    assert result.rule == {1, 4} and table["searches"] == 1
    assert table["root rules"] == 1 and table["answer rules"] == 1
    assert table["answer"] == result.certificate.n
    judged = sum(table.get(k, 0) for k in ("root", "answer", "refused", "certified-other"))
    assert judged + table["draws"] == sum(r.n for b in batches for r in b) and table["draws"] > 0
    where = "anchor tested first" if table.get("refused rules", 0) == 0 else "anchor tested later"
    assert table[f"inputs, {where}"] == 1
    assert table[f"samples per input, {where}"] == sum(r.n for b in batches for r in b)


def test_the_ceiling_split_puts_growths_excess_where_its_anchor_was_tested(tmp_path):
    import json

    from benchmarks.ceiling import split

    def run(name, rows):
        path = tmp_path / name
        path.write_text(json.dumps({"rows": {"manchors": [{"rows": rows}]}}))
        return path

    texts = ["a", "b", "c", "d"]
    growth = run("g.json", [
        {"text": t, "anchor": anchor, "tested": tested, "queries": q}
        for t, anchor, tested, q in zip(texts, [[], ["x"], ["y"], ["z"]], [1, 2, 4, 3], [20, 50, 200, 100], strict=True)
    ])  # fmt: skip
    told = run("o.json", [{"text": t, "queries": q} for t, q in zip(texts, [20, 40, 60, 80], strict=True)])
    rows = {r["inputs"]: r for r in split(growth, told)}
    assert rows["anchor empty"]["ratio"] == 1 and rows["anchor empty"]["excess_share"] == 0
    assert rows["anchor tested first"]["count"] == 1 and rows["anchor tested first"]["excess_share"] == 10 / 170
    later = rows["anchor tested later"]
    assert later["count"] == 2 and later["growth_per_input"] == 150 and later["ratio"] == 300 / 140
    other = run("x.json", [{"text": t, "queries": 1} for t in reversed(texts)])
    with pytest.raises(ValueError, match="not runs of the same inputs"):
        split(growth, other)
    from benchmarks.ceiling import main

    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(SystemExit):  # a file that is no stream result: a usage error, not a traceback
        main([str(growth), str(tmp_path / "bad.json")])
