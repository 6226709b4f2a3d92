"""The command line with several labels, documents, each perturbation, a second opinion and infill;
what a run writes of a key."""

from tests.test_cli import PROMPT, SENTENCES, cli, inputs, keyword_sentiment, lines, report_rows, run_args

TOPICS = {"scored": "sport", "shares": "business", "minister": "politics", "software": "tech", "album": "entertainment"}


def keyword_topic(prompt: str) -> str:
    words = prompt.split("Article: ")[-1].split()
    return next((topic for word, topic in TOPICS.items() if word in words), "none")  # no label: UNPARSED


async def test_a_run_and_its_report_with_five_labels_and_documents_explained_coarse_to_fine(tmp_path):
    import json

    from tests.fault_server import FaultServer

    documents = [
        f"It rained in the morning. The {word} was the talk of the day. People went home early."
        for word in ("striker scored twice", "firm's shares fell", "minister resigned", "software update failed",
                     "new album leaked")
    ]  # fmt: skip
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    out = tmp_path / "out.jsonl"
    labels = "business,entertainment,politics,sport,tech"
    async with FaultServer(answer=keyword_topic) as server:
        args = ["run", str(source), "--out", str(out), "--base-url", server.base_url, "--prompt",
                "Article: {text}\nTopic:", "--labels", labels, "--max-queries", "100000"]  # fmt: skip
        code, err = await cli(*args)
        assert code == 0 and "5 inputs to explain; perturbed as: auto: a text of 3+ sentences" in err, err
    records = sorted(lines(out), key=lambda r: r["index"])
    found = [(r["explanation"]["data"]["label"], r["explanation"]["data"]["anchor"]) for r in records]
    assert found == [("sport", ["scored"]), ("business", ["shares"]), ("politics", ["minister"]),
                     ("tech", ["software"]), ("entertainment", ["album"])]  # fmt: skip
    assert all(r["explanation"]["data"]["coarse"]["positions"] == [1] for r in records)
    code, err = await cli("report", str(out), "-o", str(tmp_path / "report.html"))
    page = (tmp_path / "report.html").read_text()
    assert code == 0 and all(f"<h3>{label}</h3>" in page for label in labels.split(","))
    assert page.count("<span class=coarse") == 5 and "perturbed as: each word of the anchor" in page
    assert "strict" in page and all(r["k"] == "strict" for r in report_rows(page))  # run certifies strictly


def thrown_by_unk_sentiment(prompt: str) -> str:
    words = prompt.split("Review: ")[-1].split()
    return "positive" if "good" in words and "UNK" not in words else "negative"


async def test_check_gives_an_anchor_s_precision_and_coverage_under_each_perturbation():
    import json

    from tests.fault_server import FaultServer

    text = "a good and pleasant film"
    async with FaultServer(answer=thrown_by_unk_sentiment) as server:
        base = ["check", text, "--anchor", "good", "--base-url", server.base_url, "--prompt", PROMPT, "--n", "200"]
        code, out = await cli(*base, "--json", "--perturbation", "delete", stdout=True)
        assert code == 0, out
        found = json.loads(out)
        assert found["precision"] == 1.0 and found["positions"] == [1] and "deleted" in found["perturbed_as"]
        assert abs(found["coverage"] - 0.5) < 0.02
        code, out = await cli(*base, "--json", stdout=True)  # unk: the mask throws this model
        assert code == 0 and json.loads(out)["precision"] < 0.2
        served = server.prompts_served
        code, err = await cli(*base[:2], "--anchor", "great", *base[4:])
        assert code == 2 and "'great' is not in the text" in err and server.prompts_served == served
        code, err = await cli(*base, "--second-opinion", "delete")
        assert code == 2 and "give the operator as --perturbation" in err and server.prompts_served == served


async def test_a_run_under_another_perturbation_records_it_and_never_sends_the_mask(tmp_path):
    from tests.fault_server import FaultServer

    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=keyword_sentiment) as server:
        code, err = await cli(
            *run_args(server.base_url, inputs(tmp_path, SENTENCES[:3]), out, "--perturbation", "delete")
        )
        assert code == 0 and "perturbed as: " in err and "deleted" in err, err
        assert server.prompts and not any("UNK" in p for p in server.prompts)
    records = lines(out)
    assert len(records) == 3 and all("deleted" in r["explanation"]["data"]["perturbation"] for r in records)
    assert all(r["explanation"]["meta"]["settings"]["sampler"]["perturbation"] == "delete" for r in records)


async def test_a_run_with_a_second_opinion_records_it_and_the_report_shows_it_beside_the_precision(tmp_path):
    from tests.fault_server import FaultServer

    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=keyword_sentiment) as server:
        more = ("--second-opinion", "delete", "--second-opinion-samples", "60")
        code, err = await cli(*run_args(server.base_url, inputs(tmp_path, SENTENCES[:3]), out, *more))
        assert code == 0, err
    records = lines(out)
    opinions = [r["explanation"]["data"]["second_opinion"] for r in records]
    assert len(records) == 3 and all(o["perturbation"] == "delete" and o["samples"] == 60 for o in opinions)
    assert all(r["explanation"]["meta"]["stages"]["second opinion"]["samples"] == 60 for r in records)
    code, _ = await cli("report", str(out), "-o", str(tmp_path / "report.html"))
    page = (tmp_path / "report.html").read_text()
    assert code == 0 and "<th data-key=second" in page and "precision under delete" in page
    assert all(0 <= r["s"] <= 1 and len(r["o"]) == 4 for r in report_rows(page)) and "under delete" in page


def fill_or_keywords(prompt: str) -> str:
    """The fake LLM as both models: the blank's word ("superb") when asked to fill one, else keywords."""
    return "superb" if prompt.startswith("Fill in the blank") else keyword_sentiment(prompt)


async def test_a_run_under_infill_fills_with_the_same_server_and_counts_its_fills_apart(tmp_path):
    from tests.fault_server import FaultServer

    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=fill_or_keywords) as server:
        code, err = await cli(*run_args(server.base_url, inputs(tmp_path, SENTENCES[:2]), out, "--perturbation",
                                        "infill"))  # fmt: skip
        assert code == 0, err
        fills = [p for p in server.prompts if p.startswith("Fill in the blank")]
        assert fills and any("superb" in p for p in server.prompts if p.startswith("Review:"))
    records = lines(out)
    infill = [r["explanation"]["meta"]["infill"]["settled"]["queries"] for r in records]
    assert len(records) == 2 and sum(infill) == len(fills) and all(infill)  # each input's blanks, asked once


async def test_a_filler_answering_nan_costs_its_fills_not_the_run(tmp_path):
    import math

    from tests.fault_server import FaultServer

    def broken(prompt: str, answer: str) -> list[tuple[str, float]]:  # a filler whose numbers are not numbers
        if prompt.startswith("Fill in the blank"):
            return [(answer, math.nan), (" great", -math.inf), (" fine", math.nan)]
        return [(answer, -0.1), (" negative" if answer != " negative" else " positive", -2.5)]

    out, first = tmp_path / "out.jsonl", SENTENCES[:2] + SENTENCES[6:8]
    async with FaultServer(answer=fill_or_keywords, alternatives=broken) as server:
        code, err = await cli(*run_args(server.base_url, inputs(tmp_path, first), out, "--perturbation", "infill"))
        assert code == 0, err  # it was rc 1: "Probabilities contain NaN", and so was every rerun
        assert any(p.startswith("Fill in the blank") for p in server.prompts)
    assert len(lines(out)) == 4 and all("explanation" in r for r in lines(out))
    port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    async with FaultServer(answer=fill_or_keywords, port=port) as healthy:  # the same --out and cache: it goes on
        more = first + SENTENCES[2:4] + SENTENCES[8:10]
        code, err = await cli(*run_args(healthy.base_url, inputs(tmp_path, more), out, "--perturbation", "infill"))
        assert code == 0, err
    assert len(lines(out)) == 8 and all("explanation" in r for r in lines(out))


async def test_labels_sharing_a_prefix_are_read_as_the_model_spelled_them(tmp_path):
    import math

    from tests.fault_server import FaultServer

    def short_label(prompt: str, answer: str) -> list[tuple[str, float]]:
        return [(" pos", math.log(0.95)), (" positive", -3.0)]

    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=lambda p: "pos", alternatives=short_label) as server:
        code, err = await cli(*run_args(server.base_url, inputs(tmp_path, SENTENCES[:1]), out, "--labels",
                                        "pos,positive"))  # fmt: skip
        assert code == 0, err
        assert all(body["max_tokens"] > 1 for body in server.bodies)  # room to spell them
    (record,) = lines(out)
    assert record["explanation"]["data"]["label"] == "pos"  # it was "positive"


async def test_a_key_in_the_base_url_is_in_no_file_a_run_or_its_report_writes(tmp_path):
    from tests.fault_server import FaultServer

    key = "Zq8vT3kLm9XwR2pN7sHd"
    async with FaultServer(answer=keyword_sentiment, fail_rate=1.0, kinds=["drop"]) as server:
        root = server.base_url.removesuffix("/v1")
        for n, url in enumerate([f"{root}/v1?api_key={key}", f"{root}/{key}/v1"]):
            out = tmp_path / f"out{n}.jsonl"
            code, err = await cli(*run_args(url, inputs(tmp_path, SENTENCES[:2]), out, "--max-attempts", "1"))
            assert code == 4 and key not in err, err  # faults: every call dropped, the lines say where
            assert all(r.get("fault") and "<redacted>" in r["failed"] for r in lines(out))
            code, err = await cli("report", str(out), "-o", str(tmp_path / f"report{n}.html"))
            assert code == 0, err
        code, err = await cli(*run_args(f"{root}/v1#{key}", inputs(tmp_path, SENTENCES[:1]), tmp_path / "o.jsonl"))
        assert code == 2 and "#fragment" in err and key not in err
        code, err = await cli(*run_args(f"http://127.0.0.1:{key}/v1", inputs(tmp_path, SENTENCES[:1]), tmp_path / "p"))
        assert code == 2 and key not in err
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) > 6 and not [p.name for p in written if key.encode() in p.read_bytes()]


async def test_a_second_opinion_that_fails_leaves_the_paid_explanation_with_the_reason(tmp_path):
    from tests.fault_server import FaultServer

    def fills_refused(prompts: list[str]) -> str | None:
        return "429" if any(p.startswith("Fill in the blank") for p in prompts) else None

    out = tmp_path / "out.jsonl"
    async with FaultServer(answer=fill_or_keywords, fail_if=fills_refused) as server:
        more = ("--second-opinion", "infill", "--second-opinion-samples", "40", "--max-attempts", "2")
        code, err = await cli(*run_args(server.base_url, inputs(tmp_path, SENTENCES[:3]), out, *more))
        assert code == 0, err  # every input was a fault line blaming the model: "fault": true
        assert server.counts["429"] >= 3
    records = lines(out)
    assert len(records) == 3 and all("explanation" in r for r in records)
    opinions = [r["explanation"]["data"]["second_opinion"] for r in records]
    assert all(o["precision"] is None and "429" in o["missing"] for o in opinions)
    assert all(r["explanation"]["data"]["anchor"] for r in records if "good" in r["explanation"]["data"]["query"])
    code, _ = await cli("report", str(out), "-o", str(tmp_path / "report.html"))
    rows = report_rows((tmp_path / "report.html").read_text())
    assert code == 0 and all(r["s"] == -1 and r["o"].startswith("not measured: ") and "429" in r["o"] for r in rows)


async def test_a_finished_out_refuses_another_configuration_before_anything_starts(tmp_path):
    from tests.fault_server import FaultServer

    out, source = tmp_path / "out.jsonl", inputs(tmp_path, SENTENCES[:2])
    async with FaultServer(answer=keyword_sentiment) as server:
        assert (await cli(*run_args(server.base_url, source, out)))[0] == 0
        code, err = await cli(*run_args(server.base_url, source, out))
        assert code == 0 and "all 2 inputs are done already" in err
        asked = len(server.prompts)
        code, err = await cli(*run_args(server.base_url, source, out, "--seed", "5"))
        assert code == 2 and "another configuration (seed: 0 → 5)" in err, err  # it was rc 0, "all done"
        code, err = await cli(*run_args(server.base_url, source, out, "--threshold", "0.9"))
        assert code == 2 and "search.threshold: 0.95 → 0.9" in err, err
        assert len(server.prompts) == asked  # nothing was asked of the model


async def test_explain_runs_manchors_guided_search_and_anchors_only_when_told(tmp_path):
    import json

    from llm_anchors import LLMClassifier, MAnchorsExplainer
    from llm_anchors.backends.openai_compat import OpenAICompatibleBackend
    from tests.fault_server import FaultServer

    sentence = "a good and great film with a fine plot"
    async with FaultServer(answer=keyword_sentiment) as server:
        common = ["--base-url", server.base_url, "--model", "m", "--prompt", PROMPT, "--json", "--free"]
        code, out = await cli("explain", sentence, *common, stdout=True)
        assert code == 0, out
        guided = json.loads(out)
        code, out = await cli("explain", sentence, *common, "--anchors", stdout=True)
        baseline = json.loads(out)
        backend = OpenAICompatibleBackend(server.base_url, "m", max_request_size=8)
        clf = LLMClassifier(backend, PROMPT, ["negative", "positive"], price=__import__("llm_anchors").extend.FREE)
        async with MAnchorsExplainer(clf, seed=0, memory=None) as product:
            expected = await product.explain(sentence)
    assert guided["meta"]["explainer"] == "MAnchorsExplainer" and baseline["meta"]["explainer"] == "AnchorsExplainer"
    assert guided["meta"]["queries"] == expected.meta.queries < baseline["meta"]["queries"]
    assert tuple(guided["data"]["anchor"]) == expected.data.anchor


async def test_explain_with_a_memory_answers_the_same_text_again_at_no_query(tmp_path):
    import json

    from tests.fault_server import FaultServer

    memory = tmp_path / "memory"
    async with FaultServer(answer=keyword_sentiment) as server:
        common = ["--base-url", server.base_url, "--model", "m", "--prompt", PROMPT, "--json", "--free",
                  "--memory", str(memory)]  # fmt: skip
        first = json.loads((await cli("explain", "a good and great film", *common, stdout=True))[1])
        again = json.loads((await cli("explain", "a good and great film", *common, stdout=True))[1])
        other = json.loads((await cli("explain", "a good and great plot", *common, stdout=True))[1])
    assert first["meta"]["queries"] > 0 and again["meta"]["queries"] == 0 and again["meta"]["memory"]["repeat"]
    assert again["data"]["anchor"] == first["data"]["anchor"] and other["meta"]["memory_hit"]
    assert (memory / "CURRENT").exists() and len((memory / "explained.jsonl").read_text().splitlines()) == 2
