#!/usr/bin/env python3
"""scripts/validate_torchtitan_rows.py --by-class: each compute op's class (signatures written by
hand) and, on eventsim's own timelines, the classes each row must and must not have.

    torchtitan_rows_test.py EVENTSIM REPO_DIR
"""
import os
import sys
import unittest

EVENTSIM, REPO = sys.argv[1:3]
sys.path.insert(0, os.path.join(REPO, "scripts"))
import validate_torchtitan_rows as rows  # noqa: E402


class OpClass(unittest.TestCase):
    def test_signatures(self):
        cases = [
            ("fc1", "gemm m=16384 n=14336 k=4096 layout=nt dtype=bf16", "GEMM bf16"),
            ("fc1", "gemm m=16384 n=14336 k=4096 layout=nt dtype=fp8", "GEMM fp8"),
            ("core_attention", "flash_attn_fwd batch=64 groups=8 seq=8192 dim=128 causal=1 "
             "dtype=bf16", "attn fwd"),
            ("core_attention_bwd", "flash_attn_bwd batch=64 groups=8 seq=8192 dim=128 causal=1 "
             "dtype=bf16", "attn bwd"),
            ("fc1_cast", "fp8_quantize elems=1 dtype=bf16", "fp8 casts/amax"),
            ("fc1_amax", "amax elems=1 dtype=bf16", "fp8 casts/amax"),
            ("adamw_fused", "memory_pass read_bytes=16 write_bytes=12 dtype=fp32",
             "optimizer/clip"),
            ("grad_norm", "memory_pass read_bytes=4 write_bytes=4 dtype=fp32", "optimizer/clip"),
            ("fsdp_copy_in", "memory_pass read_bytes=4 write_bytes=4 dtype=bf16", "FSDP copies"),
            ("ce_log_softmax", "memory_pass read_bytes=4 write_bytes=4 dtype=fp32",
             "loss (eager)"),
            ("rmsnorm_pow", "memory_pass read_bytes=4 write_bytes=4 dtype=fp32",
             "eager elementwise"),
            ("cp_out_correction", "memory_pass read_bytes=6 write_bytes=3 dtype=bf16",
             "CP ring copies"),
            ("layernorm", "rmsnorm_fwd tokens=8192 hidden=4096 dtype=bf16",
             "fused elementwise/norm/emb"),
        ]
        for op, event, want in cases:
            self.assertEqual(rows.op_class(op, event), want, (op, event))
        self.assertEqual(set(want for _, _, want in cases), set(rows.CLASSES))


class ByClass(unittest.TestCase):
    def sums(self, label):
        for name, _, b, compile_mode, extra in rows.ROWS:
            if name == label:
                extra = ["fused" if flag == rows.TORCHAO else flag for flag in extra]
                _, _, cmd = rows.predict(os.path.dirname(EVENTSIM), "grand-teton-h100", b,
                                         compile_mode, extra)
                return rows.by_class(cmd)
        self.fail(f"no row {label}")

    def test_eager_row_has_eager_kernels_and_no_fp8(self):
        s = self.sums("torchtitan Table 1: FSDP, b 2, eager")
        self.assertGreater(s["eager elementwise"], s["fused elementwise/norm/emb"])
        self.assertEqual(s["GEMM fp8"], 0)
        self.assertEqual(s["fp8 casts/amax"], 0)

    def test_float8_row_runs_fp8_gemms_and_casts(self):
        s = self.sums("torchtitan Table 1: FSDP + compile + Float8, b 2")
        self.assertGreater(s["GEMM fp8"], s["GEMM bf16"])  # the output layer stays bf16
        self.assertGreater(s["fp8 casts/amax"], 0)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
