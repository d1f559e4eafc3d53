"""tune.html, treatments.csv and the closing lines of a tune, from hand-made
documents built through the tune.json contract (tests/support/tunedocs.py)."""

from __future__ import annotations

import csv
import io
import re
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from chromium import CHROMIUM
from chromium import FLAGS as BROWSER_FLAGS
from tunedocs import (
    FRONT,
    HOSTILE_COMMAND,
    HOSTILE_LOG,
    HOSTILE_SETTING,
    MEASURED,
    RANKED,
    RECOMMENDED,
    tune_doc,
)

from slogate.analysis.documents.contracts import ContractError, Tune
from slogate.reports.study_lines import tune_closing_lines
from slogate.reports.tune import capacity_whisker, inside, pareto_chart, write_tune


def svg_of(doc: Tune) -> ET.Element:
    return ET.fromstring(str(pareto_chart(doc)))


def centre(shape: ET.Element) -> tuple[float, float]:
    """Where a marker sits: a dot's centre, a square's middle, a diamond's (its
    path starts at its top vertex, 8 above)."""
    if shape.tag == "circle":
        return float(shape.get("cx", "")), float(shape.get("cy", ""))
    if shape.tag == "rect":
        return float(shape.get("x", "")) + 5, float(shape.get("y", "")) + 5
    x, y = re.match(r"M([\d.]+),([\d.]+)", shape.get("d", "")).groups()  # type: ignore[union-attr]
    return float(x), float(y) + 8


def markers(root: ET.Element) -> dict[str, tuple[str, tuple[float, float]]]:
    """Each marker by its treatment's name (its hover text starts with it): kind, centre."""
    found = {}
    for shape in root.iter():
        title = shape.find("title")
        if "mk" in (shape.get("class") or "").split() and title is not None:
            name = (title.text or "").split(":")[0]
            found.setdefault(name, []).append((shape.get("class", "").split()[1], centre(shape)))
    return {name: pairs[0] for name, pairs in found.items()} | {
        f"{name}+": pairs[1] for name, pairs in found.items() if len(pairs) > 1
    }


def front_vertices(root: ET.Element) -> list[tuple[float, float]]:
    group = next(g for g in root.iter("g") if g.findtext("title") == "Pareto front")
    d = group.find("path").get("d")  # type: ignore[union-attr]
    return [tuple(map(float, pair.split(","))) for pair in d[1:].split("L")]  # type: ignore[misc,index]


def test_the_front_joins_the_hand_checked_treatments_by_throughput_per_user() -> None:
    root = svg_of(tune_doc())
    drawn = markers(root)
    assert front_vertices(root) == [drawn[name][1] for name in FRONT]
    assert drawn["E"][1] not in front_vertices(root) and drawn["F"][1] not in front_vertices(root)
    assert sorted(n for n in drawn if not n.endswith("+")) == ["A", "B", "C", "D", "E", "F"]
    xs = [x for x, _ in front_vertices(root)]
    ys = [y for _, y in front_vertices(root)]
    assert xs == sorted(xs) and ys == sorted(ys)  # per user rises, per GPU falls (y grows down)


def test_recommended_and_current_are_marked_and_points_link_to_their_reports() -> None:
    root = svg_of(tune_doc())
    drawn = markers(root)
    assert drawn["D"][0] == "recommended" and drawn["E"][0] == "current"
    assert {drawn[n][0] for n in "ABC"} == {"front"} and drawn["F"][0] == "dominated"
    links = {a.get("href") for a in root.iter("a")}
    assert links == {f"treatments/{n}/sweep/confirm/report.html" for n in "ABCDEF"}
    ranks = sorted(t.text or "" for t in root.iter("text") if t.get("class") == "mt")
    assert ranks == ["1", "2", "3", "4", "5", "6"]
    # recommending the current settings: the diamond and the square on one point
    both = markers(svg_of(tune_doc(recommended={**RECOMMENDED, "treatment": "E"})))
    assert both["E"][0] == "recommended" and both["E+"] == ("current", both["E"][1])


def test_whiskers_carry_the_capacity_interval_to_throughput_per_gpu() -> None:
    doc = tune_doc()
    by_name = {t.name: t for t in doc.treatments}
    d = capacity_whisker(by_name["D"], 12.0, 950.0)
    assert (d.y_low, d.y_high) == pytest.approx((900.0, 1050.0))  # 9.5 [9, 10.5] x 100
    f = capacity_whisker(by_name["F"], 20.0, 850.0)
    assert f.y_low == pytest.approx(800.0) and f.y_high is None  # no load failed: open
    root = svg_of(doc)
    groups = [g for g in root.iter("g") if g.get("class") == "wk"]
    assert len(groups) == 6
    d_lines = next(g for g in groups if (g.findtext("title") or "").startswith("D:"))
    assert len(d_lines.findall("line")) == 4  # down and up, each capped
    tops = [
        float(line.get(end, ""))
        for g in groups
        for line in g.findall("line")
        for end in ("y1", "y2")
    ]
    assert min(tops) >= 34  # the plot's top: the axis holds the whiskers


def test_pruned_failed_and_unmeasured_treatments_are_listed_not_drawn(tmp_path: Path) -> None:
    page = write_tune(tmp_path, tune_doc())["report"].read_text()
    root = svg_of(tune_doc())
    assert not {"G", "H"} & set(markers(root))
    pruned = page.split("<h3>Pruned by screening</h3>")[1].split("</table>")[0]
    assert "screening bracket [2, 3] below the best&#39;s lower bound 9" in pruned
    assert "[2, 3] requests/s" in pruned
    failed = page.split("<h3>Failed</h3>")[1].split("</table>")[0]
    assert "the engine exited with code 1 before it served" in failed
    assert "CUDA out of memory" in failed


def table_rows(page: str) -> list[str]:
    table = page.split('<table class="tune">')[1].split("</table>")[0]
    return table.split("<tr")[2:]


def test_the_ranked_table_lists_measured_treatments_best_first(tmp_path: Path) -> None:
    page = write_tune(tmp_path, tune_doc())["report"].read_text()
    rows = table_rows(page)
    names = [re.search(r'report.html">(\w)</a>', row).group(1) for row in rows]  # type: ignore[union-attr]
    assert names == list(RANKED)
    for row, name in zip(rows, names, strict=True):
        verdict = MEASURED[name][7]
        if verdict is None:
            assert "(current)" in row and "chip" not in row
        else:
            assert f'<span class="chip {verdict}">' in row
    assert rows[0].startswith(' class="recommended"')
    assert "9.5 requests/s [9, 10.5]" in rows[0] and "17.30 GB" in rows[0] and "21.50 s" in rows[0]
    assert "8.5 requests/s [8, open]" in rows[2]
    assert "chat: ttft_ms p99 &lt;= 500" in rows[0]
    # D's [9, 10.5] overlaps C's [9, 10]: the page says the pick is a toss-up
    assert "The runner-up, C, is within the noise of it" in page


def test_hostile_settings_command_and_engine_log_are_shown_as_text(tmp_path: Path) -> None:
    hostile = {"max_num_seqs": HOSTILE_SETTING, "enable_chunked_prefill": "true"}
    doc = tune_doc(
        treatments={"A": {"settings": hostile}, "G": {"error": HOSTILE_LOG}},
        command=HOSTILE_COMMAND,
        current={"settings": hostile, "treatment": "E"},
        recommended={**RECOMMENDED, "command_line": HOSTILE_COMMAND,
                     "yaml": f"max_num_seqs: {HOSTILE_SETTING}\n"},
    )  # fmt: skip
    files = write_tune(tmp_path, doc)
    page = files["report"].read_text()
    assert "<script" not in page and "<img" not in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert "max_num_seqs=&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\u202e" not in page and "\ufffd[31mCUDA" in page
    ET.fromstring(str(pareto_chart(doc)))  # the hover texts keep the chart well-formed
    lines = tune_closing_lines(doc, {"report": tmp_path / "tune.html"})
    assert not any("\x1b" in line or "\u202e" in line for line in lines)
    assert f"slogate: launch with: {HOSTILE_COMMAND}" in lines


def test_links_stay_inside_the_tune_folder(tmp_path: Path) -> None:
    odd = {"A": "../../home/report.html", "B": "/etc/report.html", "C": "treatments/a/../../../x",
           "D": "javascript:alert(1)", "E": "treatments/seqs=8 #1/%2e%2e\\report.html"}  # fmt: skip
    doc = tune_doc(treatments={name: {"report": path} for name, path in odd.items()})
    page = write_tune(tmp_path, doc)["report"].read_text()
    hrefs = set(re.findall(r'href="([^"]*)"', page))
    assert hrefs == {
        "tune.json",
        "treatments.csv",
        "treatments/F/sweep/confirm/report.html",
        *(f"treatments/{n}/sweep/" for n in "ABCDEF"),
        "javascript%3Aalert%281%29",  # a file of that name in the folder
        "treatments/seqs%3D8%20%231/%252e%252e%5Creport.html",
    }
    assert [inside(odd[n]) for n in "ABC"] == [None, None, None]
    assert ">A</a>" not in page and '<td class="l">A <a href="treatments/A/sweep/"' in page


def test_treatments_csv_ranks_first_with_a_column_per_setting(tmp_path: Path) -> None:
    files = write_tune(tmp_path, tune_doc())
    rows = list(csv.DictReader(io.StringIO(files["treatments"].read_text())))
    assert [r["name"] for r in rows] == [*RANKED, "G", "H"]
    assert rows[0]["set:max_num_seqs"] == "32" and rows[0]["set:enable_chunked_prefill"] == "true"
    assert rows[0]["recommended"] == "True" and rows[4]["current"] == "True"
    assert (rows[2]["capacity_lower"], rows[2]["capacity_upper"]) == ("8.0", "")
    assert rows[7]["status"] == "pruned" and rows[7]["screening_upper"] == "3.0"


def test_closing_lines_say_what_to_launch_and_what_beat_the_current_settings() -> None:
    files = {"json": Path("out/tune.json"), "report": Path("out/tune.html")}
    assert tune_closing_lines(tune_doc(), files) == [
        "slogate: D holds 9.5 requests/s under every SLO, 58% more than the current settings",
        "slogate:   1. D max_num_seqs=32 enable_chunked_prefill=true: 9.5 requests/s [9, 10.5], "
        "better than the current settings",
        "slogate:   2. C max_num_seqs=16 enable_chunked_prefill=true: 9 requests/s [9, 10], "
        "better than the current settings",
        "slogate:   3. F max_num_seqs=16 enable_chunked_prefill=false: 8.5 requests/s [8, open], "
        "better than the current settings",
        "slogate:   4. B max_num_seqs=8 enable_chunked_prefill=true: 7 requests/s [6.5, 7.5], "
        "within the noise of the current settings",
        "slogate:   5. E max_num_seqs=8 enable_chunked_prefill=false (current): "
        "6 requests/s [5.5, 6.5]",
        "slogate:   6. A max_num_seqs=4 enable_chunked_prefill=true: 4 requests/s [4, 4.5], "
        "worse than the current settings",
        "slogate: recommended D max_num_seqs=32 enable_chunked_prefill=true "
        "(capacity 9.5 requests/s [9, 10.5]), within the noise of the runner-up C "
        "(either will do)",
        "slogate: launch with: vllm serve m --max-num-seqs 32 --enable-chunked-prefill",
        "slogate: better than the current settings (E) by more than their intervals: D, C, F",
        "slogate: within the noise of the current settings (intervals overlap): B",
        "slogate: worse than the current settings by more than their intervals: "
        "A, H (screening only)",
        "slogate: screening pruned 1 of 8 treatments: "
        "H (screening bracket [2, 3] below the best's lower bound 9)",
        "slogate: G failed: the engine exited with code 1 before it served",
        "slogate: engine time 20.0 min, 40% of the 50.0 min a full grid takes",
        "slogate: json out/tune.json",
        "slogate: report out/tune.html",
    ]


def test_a_tune_named_by_its_settings_shows_them_once(tmp_path: Path) -> None:
    levels = {**{n: v[:2] for n, v in MEASURED.items()}, "G": ("32", "false"), "H": ("4", "false")}
    spelled = {
        n: f"max_num_seqs={seqs},enable_chunked_prefill={c}" for n, (seqs, c) in levels.items()
    }
    doc = tune_doc(
        treatments={n: {"name": name} for n, name in spelled.items()},
        recommended={**RECOMMENDED, "treatment": spelled["D"], "runner_up": None},
        current={"settings": {"max_num_seqs": "8", "enable_chunked_prefill": "false"},
                 "treatment": spelled["E"]},
    )  # fmt: skip
    page = write_tune(tmp_path, doc)["report"].read_text()
    header = page.split('<table class="tune">')[1].split("</tr>")[0]
    assert "settings" not in header and "treatment" in header
    first = table_rows(page)[0]
    assert first.count("max_num_seqs=32") == 1  # the link's text, not a second column
    lines = tune_closing_lines(doc, {})
    assert f"slogate: recommended {spelled['D']} (capacity 9.5 requests/s [9, 10.5])" in lines
    assert f"slogate:   5. {spelled['E']} (current): 6 requests/s [5.5, 6.5]" in lines


def test_an_unfinished_tune_with_the_current_settings_failed(tmp_path: Path) -> None:
    pending = {
        "status": "pending",
        "capacity": None,
        "throughput": None,
        "rank": None,
        "pareto": False,
        "vs_current": None,
    }
    no_gpus = {"throughput": {"output_tokens_per_s": 850.0, "per_user": 20.0}}
    doc = tune_doc(
        treatments={**dict.fromkeys("ABCD", pending), "E": {"status": "failed", "throughput": None},
                    "F": no_gpus},
        recommended=None, finished=False, ended_at=None, verdict="invalid", exit_code=3,
        full_grid_engine_time_s=None,
    )  # fmt: skip
    page = write_tune(tmp_path, doc)["report"].read_text()
    assert "This tune did not finish" in page and "No recommendation" in page
    assert "<h3>Not reached</h3>" in page and "output tokens/s of the engine" in page
    lines = tune_closing_lines(doc.model_dump(mode="json", by_alias=True), {})
    assert "slogate: the current settings (E) were not measured: no comparison" in lines
    assert "slogate: not reached (4 of 8; --resume goes on): A, B, C, D" in lines
    assert "slogate: engine time 20.0 min" in lines
    assert not any(line.startswith("slogate: recommended") for line in lines)


def test_a_document_as_written_is_read_through_the_contract(tmp_path: Path) -> None:
    written = tune_doc().model_dump(mode="json", by_alias=True)
    assert write_tune(tmp_path / "a", written)["report"].exists()
    written["treatments"][0]["status"] = "skipped"
    with pytest.raises(ContractError, match=r"tune.json: .*treatments\.0\.status"):
        write_tune(tmp_path / "b", written)


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (tools/install-chromium.sh)")
def test_the_tune_page_renders_offline_in_headless_chromium(tmp_path: Path) -> None:
    page = write_tune(tmp_path / "tune", tune_doc())["report"]
    png = tmp_path / "tune.png"
    done = subprocess.run(
        [CHROMIUM, *BROWSER_FLAGS, "--enable-logging=stderr", "--v=0",
         "--window-size=1280,2300", f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={png}", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert [line for line in done.stderr.splitlines() if "CONSOLE" in line] == []
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1280, 2300)
    assert len(data) > 50_000
