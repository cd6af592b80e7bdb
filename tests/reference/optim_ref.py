"""torch.optim reference for tests/unit/optim/test_optim_torch.cpp.

Usage: optim_ref.py DIR [DIR...] (one run per DIR, so torch is imported once). DIR is an
optim_case.py case; its settings add opt=sgd|adamw, momentum, nesterov, beta1, beta2, eps.
Runs torch.optim.SGD / AdamW in float32, one param group per tensor, and writes w.bin.
"""
import sys

import torch

from optim_case import Case


def run(d):
    case = Case(d)
    kv = case.settings
    if kv["opt"] == "sgd":
        opt = torch.optim.SGD(case.groups(), lr=case.lrs[0], momentum=float(kv["momentum"]),
                              nesterov=kv["nesterov"] == "1")
    elif kv["opt"] == "adamw":
        opt = torch.optim.AdamW(case.groups(), lr=case.lrs[0],
                                betas=(float(kv["beta1"]), float(kv["beta2"])),
                                eps=float(kv["eps"]))
    else:
        raise SystemExit("unknown opt " + kv["opt"])
    case.replay(opt)
    case.write("w", case.params)


if __name__ == "__main__":
    torch.set_num_threads(2)
    for case_dir in sys.argv[1:]:
        run(case_dir)
