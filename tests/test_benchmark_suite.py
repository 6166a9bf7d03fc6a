"""The benchmark suite on the CPU: its smoke run (every step, tiny sizes, Triton's interpreter) for
a few cases, the worker watch that stops a case past its limit, and the table it writes."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import suite  # noqa: E402
import suite_report  # noqa: E402
import suite_torch  # noqa: E402
from suite_cases import CASES  # noqa: E402


def test_smoke_runs_every_step_and_everything_is_correct(tmp_path):
    only = {"matmul_fp16_4096", "transpose_fp32_4096"}
    assert suite.smoke_run(str(tmp_path), only) == 0
    with open(tmp_path / "out" / "suite.json") as handle:
        run = json.load(handle)
    assert run["copy"]["gbps"] > 0
    assert sorted(case["name"] for case in run["cases"]) == sorted(only)
    transpose = next(case for case in run["cases"] if case["name"] == "transpose_fp32_4096")
    assert transpose["copy"]["bytes"] == transpose["bytes"] and transpose["copy"]["us"] > 0  # its own copy
    assert "copy" not in next(case for case in run["cases"] if case["name"] == "matmul_fp16_4096")
    for case in run["cases"]:
        assert case["ours"]["ok"] and case["ours"]["us"] > 0
        # the smoke sizes have 16-byte rows: the interpreter runs the descriptor variant, then the pointer one
        assert set(case["variants"].values()) == {"descriptors"}
        assert case["pointers"]["ok"] and all(v.startswith("pointers") for v in case["pointers"]["variants"].values())
        assert case["peers"] and all(peer["ok"] and peer["us"] > 0 for peer in case["peers"].values())
    assert "| matmul_fp16_4096 | 1 | descriptors | yes" in (tmp_path / "out" / "section.md").read_text()


def test_smoke_run_of_a_backward_case_checks_every_gradient_and_its_peer(tmp_path):
    """A backward module (tir_passes.differentiate) writes several gradients; the reference is float64
    autograd, the peer torch's own backward, both returning the gradients in parameter order."""
    only = {"rmsnorm_backward_fp16_16384x8192"}
    assert suite.smoke_run(str(tmp_path), only) == 0
    with open(tmp_path / "out" / "suite.json") as handle:
        (case,) = json.load(handle)["cases"]
    # X, weight, the saved sum of squares (made by the training forward first), d_Y, then d_X, d_weight
    assert case["ours"]["ok"] and sorted(case["ours"]["rel_error"]) == ["4", "5"]
    assert case["peers"]["torch autograd"]["ok"]


def _fake_case(folder, name: str, body: str) -> dict:
    (folder / f"{name}.py").write_text(f"import time\n\n\ndef run(A, B):\n    {body}\n")
    return {"name": name, "program": "transpose", "module": f"{name}.py", "sizes": {}, "shape_vars": {},
            "params": [{"name": "A", "kind": "buffer", "dtype": "float32", "shape": [4, 8], "written": False},
                       {"name": "B", "kind": "buffer", "dtype": "float32", "shape": [8, 4], "written": True}],
            "bytes": 256, "flops": 0, "kernels": 1, "descriptor_kernels": [], "goal": {}}


def test_a_case_past_its_limit_is_stopped_and_the_next_runs_in_a_fresh_worker(tmp_path):
    cases = [_fake_case(tmp_path, "hangs", "time.sleep(600)"), _fake_case(tmp_path, "transposes", "B.copy_(A.T)")]
    (tmp_path / suite.MANIFEST).write_text(json.dumps(cases))
    run = suite.run(str(tmp_path), str(tmp_path / "out"), smoke=True, case_limit_s=20, deadline_s=300)
    hangs, transposes = run["cases"]
    assert hangs["name"] == "hangs" and hangs["skipped"].startswith("stopped after")
    assert transposes["ours"]["ok"] and transposes["peers"]["torch eager"]["ok"]
    assert json.loads((tmp_path / "out" / "suite.json").read_text())["cases"] == run["cases"]


def _measured_run() -> dict:
    return {
        "meta": {"date": "2026-12-01", "device": "NVIDIA H200", "torch": "2.11", "triton": "3.6",
                 "command": "python benchmarks/suite.py run gen out", "folder": "gen", "total_s": 201.0},
        "copy": {"gbps": 4000.0},
        "cases": [
            {"name": "softmax", "kernels": 1, "bytes": 4_000_000, "flops": 0,
             "goal": {"copy_fraction": 0.95, "versus": [["torch.compile", 1.0]]},
             "ours": {"us": 1.0, "ok": True, "rel_error": {"1": 2e-4}}, "variants": {"softmax_kernel0": "pointers: x"},
             "peers": {"torch.compile": {"us": 2.0, "ok": True}}},
            {"name": "matmul", "kernels": 1, "bytes": 1, "flops": 2 * 10**9,
             "goal": {"versus": [["cuBLAS", 0.95]]}, "ours": {"us": 10.0, "ok": True, "rel_error": {"2": 1e-6}},
             "variants": {"matmul_kernel0": "descriptors"}, "pointers": {"us": 30.0, "ok": True},
             "peers": {"cuBLAS": {"us": 9.0, "ok": True}}},
            {"name": "attention", "kernels": 2, "skipped": "stopped after 75 s at its 75 s limit"},
        ],
    }


def test_goals_are_evaluated_from_the_run():
    softmax, matmul, _ = _measured_run()["cases"]
    assert suite_report.evaluate_goals(softmax, 4000.0) == [("≥ 95% of copy", "100.0% of copy", True),
                                                            ("≥ 1.00× torch.compile", "2.00× torch.compile", True)]
    assert suite_report.evaluate_goals(matmul, 4000.0) == [("≥ 95% of cuBLAS", "90.0% of cuBLAS", False)]
    assert suite_report.evaluate_goals(matmul, None)[0][2] is False  # a peer ratio needs no copy
    assert suite_report.evaluate_goals({"goal": {"max_us": 32}}, None) == [("≤ 32 µs", "n/a", None)]


def test_a_memory_bound_goal_divides_by_the_copy_of_its_own_bytes():
    """A case with its own copy (timed beside it, its floor bytes) is measured against that copy's rate,
    not the device copy's: 4 MB in 1 µs is 80% of a 5 TB/s copy, whatever the device copy reached."""
    softmax = dict(_measured_run()["cases"][0], copy={"bytes": 4_000_000, "us": 0.8, "gbps": 5000.0})
    assert suite_report.copy_fraction(softmax, 4000.0) == 0.8
    assert suite_report.evaluate_goals(softmax, 4000.0)[0] == ("≥ 95% of copy", "80.0% of a copy of its bytes", False)
    assert suite_report.case_copy_gbps({"copy": {"error": "out of memory"}}, 4000.0) == (4000.0, False)


def test_a_goal_against_the_best_peer_takes_the_fastest_correct_one():
    case = {"goal": {"versus": [[suite_report.BEST, 0.9]]}, "ours": {"us": 10.0},
            "peers": {"SDPA flash": {"us": 12.0, "ok": True}, "SDPA cuDNN": {"us": 8.0, "ok": True},
                      "SDPA efficient": {"us": 5.0, "ok": False}, "SDPA default": {"error": "no kernel"}}}
    assert suite_report.best_peer(case) == ("SDPA cuDNN", 8.0)
    assert suite_report.evaluate_goals(case, None) == [
        ("≥ 90% of the best peer (SDPA cuDNN)", "80.0% of the best peer (SDPA cuDNN)", False)]
    assert suite_report.evaluate_goals({"goal": case["goal"], "ours": {"us": 1.0}, "peers": {}}, None)[0][2] is None


def test_a_deterministic_case_is_measured_against_its_flagless_case():
    base = {"name": "softmax", "ours": {"us": 10.0, "ok": True}}
    cheap = {"name": "softmax_deterministic", "goal": {"baseline": ["softmax", 0.05]}, "ours": {"us": 10.4, "ok": True}}
    costly = {**cheap, "ours": {"us": 11.0, "ok": True}}
    run = {"softmax": base}
    assert suite_report.evaluate_goals(cheap, None, run) == [("≤ 5% slower than softmax", "+4.0%", True)]
    assert suite_report.evaluate_goals(costly, None, run)[0][2] is False
    assert suite_report.evaluate_goals(cheap, None, {})[0] == ("≤ 5% slower than softmax", "n/a", None)
    flagged = [case for case in CASES if case.deterministic]
    names = {case.name for case in CASES}
    assert {"softmax", "rmsnorm", "layernorm", "matmul", "attention"} <= {case.program for case in flagged}
    assert all(case.goal.baseline[0] in names and not case.goal.baseline[0].endswith("_deterministic")
               for case in flagged)


def test_the_table_rewrites_only_its_section_and_keeps_the_json(tmp_path):
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# Benchmarks\n\nintro\n\n{suite_report.BEGIN}\nold table\n{suite_report.END}\n\n## Older runs\n")
    run = _measured_run()
    suite_report.rewrite_docs(run, str(docs))
    text = docs.read_text()
    assert text.startswith("# Benchmarks\n\nintro\n\n") and text.endswith("\n\n## Older runs\n")
    assert "old table" not in text and text.count(suite_report.BEGIN) == 1
    assert "| matmul | 1 | descriptors | yes (1.0e-06) | 10.0 µs | 200 TFLOP/s | 30.0 µs | cuBLAS 9.0 µs (0.90×) | — | " \
           "≥ 95% of cuBLAS: 90.0% of cuBLAS, **missed** |" in text
    assert "| attention | 2 | | | not run: stopped after 75 s at its 75 s limit |" in text
    assert "Device copy (read + write): 4.00 TB/s. A memory-bound case's goal divides" in text
    suite_report.rewrite_docs(run, str(docs))
    assert docs.read_text() == text  # the same run gives the same page
    source = tmp_path / "suite.json"
    source.write_text(json.dumps(run))
    kept = suite_report.keep_results(str(source), run, str(tmp_path / "results"))
    assert os.path.basename(kept) == "2026-12-01-nvidia-h200-suite.json"
    assert json.loads(open(kept).read()) == run


def test_every_case_has_a_torch_side_and_a_size_for_each_profile():
    for case in CASES:
        assert case.program in suite_torch.PROGRAMS, case.name
        assert case.bytes(case.full) > case.bytes(case.smoke) > 0, case.name


def test_the_model_column_judges_the_prediction_against_the_measured_time():
    softmax, matmul, attention = _measured_run()["cases"]
    softmax["model"] = {"us": 0.9, "kernels": {"softmax_kernel0": {"us": 0.9, "bound": "dram"}}}
    matmul["model"] = {"us": 5.0, "kernels": {"matmul_kernel0": {"us": 5.0, "bound": "tensor cores"}}}
    assert suite_report.model_met(softmax) is True and suite_report.model_met(matmul) is False
    assert suite_report.model_met(attention) is None       # not run: not judged
    assert suite_report._model(matmul) == "5.0 µs (tensor cores), measured 2.00×"
    summary = suite_report._model_summary([softmax, matmul, attention])
    assert summary == ("The hardware model within 25% of the measured time: 1 of 2 cases; "
                       "outside: matmul (2.00×).")


def test_smoke_run_of_a_backward_with_saved_values_runs_the_training_forward_first(tmp_path):
    """The attention backward takes the row statistics the training forward saves (differentiate(save="auto")):
    the run makes them with our training forward module on the case's inputs, untimed, then checks and times
    the backward alone; the reference and the peers take the inputs and the output gradient as before."""
    only = {"attention_backward_fp16_b2h16s2048d128"}
    assert suite.smoke_run(str(tmp_path), only) == 0
    manifest = json.loads((tmp_path / suite.MANIFEST).read_text())
    (entry,) = manifest
    assert entry["training"]["saved"] == ["row_max", "row_sum", "acc"]
    assert (tmp_path / entry["training"]["module"]).exists()
    with open(tmp_path / "out" / "suite.json") as handle:
        (case,) = json.load(handle)["cases"]
    # Q, K, V, row_max, row_sum, acc, d_O, then the gradients d_Q, d_K, d_V
    assert case["ours"]["ok"] and sorted(case["ours"]["rel_error"]) == ["7", "8", "9"]
    assert all(peer["ok"] for peer in case["peers"].values())


def test_the_model_is_priced_again_for_the_gpu_the_run_is_on(tmp_path):
    """The manifest prices each case for the H200; a run on an H100 prices the same configs and
    compiled resources on the H100's figures (a bandwidth-bound kernel: slower by the copy ratio),
    and a run on the H200 or on a GPU the table lacks keeps the manifest's model."""
    from tir_passes.contracts.gpu_specs import gpu_spec

    (entry,) = suite.generate(str(tmp_path), "full", {"transpose_fp32_4096"})
    module = suite._load(str(tmp_path / entry["module"]))
    model = entry["model"]
    assert model["gpu"] == "H200" and model["us"] > 0
    h100 = suite._model_on_this_gpu(model, module, entry["shape_vars"], "NVIDIA H100 80GB HBM3")
    assert h100["gpu"] == "H100" and h100["generated_for"] == "H200"
    ratio = gpu_spec("H200").model_copy_bandwidth_gbs / gpu_spec("H100").model_copy_bandwidth_gbs
    (kernel,) = h100["kernels"].values()
    assert kernel["bound"] == "dram" and h100["us"] / model["us"] > 0.9 * ratio
    assert kernel["config"] == next(iter(model["kernels"].values()))["config"]
    assert suite._model_on_this_gpu(model, module, entry["shape_vars"], "NVIDIA H200") is model
    assert suite._model_on_this_gpu(model, module, entry["shape_vars"], "CPU (Triton's interpreter)") is model
    assert suite._model_on_this_gpu(model, module, entry["shape_vars"], "NVIDIA H100 PCIe") is model
    # a prediction that cannot be made keeps the manifest's, with the reason: the case is still measured
    broken = {**model, "kernels": {"no_such_kernel": next(iter(model["kernels"].values()))}}
    kept = suite._model_on_this_gpu(broken, module, entry["shape_vars"], "NVIDIA H100 80GB HBM3")
    assert kept["us"] == model["us"] and kept["reprice_error"].startswith("H100: KeyError")
    assert "on the H100 (" in suite_report.section({"meta": {}, "cases": [{"name": "t", "model": h100}]})


def test_the_rounded_matmul_writes_cublas_output_type_in_one_kernel(tmp_path):
    """matmul_rounded (examples/matmul.py): the float32 sums rounded to a float16 C in the kernel's
    epilogue, one kernel, checked against float64 like its peers (torch.matmul's float16 C)."""
    only = {"matmul_rounded_fp16_3000x5000x1000"}
    assert suite.smoke_run(str(tmp_path), only) == 0
    (case,) = json.loads((tmp_path / "out" / "suite.json").read_text())["cases"]
    assert case["kernels"] == 1 and case["ours"]["ok"]
    assert sorted(case["peers"]) == ["cuBLAS", "torch.compile"]
    # on a GPU too: the out_dtype peer (a float32 C) only for the float32-C matmul
    assert sorted(suite_torch.PROGRAMS["matmul_rounded"][1]("cuda")) == ["cuBLAS", "torch.compile"]
    assert "cuBLAS (torch.mm out_dtype)" in suite_torch.PROGRAMS["matmul"][1]("cuda")
    (entry,) = json.loads((tmp_path / suite.MANIFEST).read_text())
    assert [p["dtype"] for p in entry["params"]] == ["float16"] * 3


def test_the_section_names_the_gpu_machines_output_folder_as_out():
    run = {"meta": {"command": "python benchmarks/suite.py run generated/suite /root/out/suite --deadline 250"},
           "cases": []}
    section = suite_report.section(run)
    assert "run generated/suite OUT/suite --deadline 250" in section and "/root" not in section
    # only the output folder: an absolute input folder is what the reader typed too
    assert suite_report._portable("python benchmarks/suite.py run /data/gen /root/out/x") == \
        "python benchmarks/suite.py run /data/gen OUT/x"
