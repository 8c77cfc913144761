"""Token agreement: every variant teacher-forced on one sequence, its top-1 compared with the reference step's,
and a free-running greedy comparison."""
from __future__ import annotations

from ..schema.decode import AgreementRow, DecodeFile, REFERENCE_VARIANT
from ..timing import free_cuda_memory, is_oom
from .arithmetic import steps_for
from .plans import Plan
from . import sessions
from .sessions import _clean, _Env, _error_reason, _Model, _prompt, _unsupported


def ulp(x, mantissa_bits: int):
    """One unit in the last place at |x| for a float type with `mantissa_bits` significant bits."""
    import torch

    x = torch.as_tensor(x, dtype=torch.float64).abs().clamp_min(2.0**-126)
    return torch.exp2(torch.floor(torch.log2(x)) - (mantissa_bits - 1))


def agreement_fields(ref_v, ref_i, test_v, test_i, mantissa_bits: int = 8) -> dict:
    """Fields of an AgreementRow from (B, P, 2) top-2 values and ids of the reference and the variant."""
    top, second = ref_v[..., 0].double(), ref_v[..., 1].double()
    tie = (top - second) < ulp(top, mantissa_bits)
    agree = ref_i[..., 0] == test_i[..., 0]
    out_ties = ~tie
    dis = out_ties & ~agree
    margins = (top - second)[dis]
    same = agree.nonzero(as_tuple=True)
    n = int(agree.numel())
    return {
        "positions": n,
        "near_ties": int(tie.sum()),
        "near_tie_fraction": float(tie.sum()) / n,
        "agreement": float(agree[out_ties].float().mean()) if bool(out_ties.any()) else None,
        "agreement_at_near_ties": float(agree[tie].float().mean()) if bool(tie.any()) else None,
        "disagreements": int(dis.sum()),
        "max_margin_at_disagreement": float(margins.max()) if margins.numel() else None,
        "max_top1_logit_diff": float((test_v[..., 0].double() - top)[same].abs().max()) if same[0].numel() else None,
    }


def free_running_fields(tokens, ref_tokens) -> dict:
    """Greedy tokens (B, n) of a variant against the reference's from the same prompt."""
    if tuple(tokens.shape) != tuple(ref_tokens.shape):
        raise ValueError(f"token tensors differ in shape: {tuple(tokens.shape)} vs {tuple(ref_tokens.shape)}")
    eq = tokens == ref_tokens
    bad = (~eq).any(0).nonzero()
    return {"free_running_match": float(eq.float().mean()), "free_running_tokens": int(eq.numel()),
            "free_running_first_mismatch": int(bad[0, 0]) if bad.numel() else None}


def _agreement_capacity(plan: Plan, n_positions: int) -> tuple[int, int]:
    """(capacity, prompt length) of the agreement check: the sequence fills the model's positions."""
    capacity = n_positions - 1
    return capacity, capacity - plan.agreement_steps


def _agreement_reference(m: _Model, plan: Plan, env: _Env) -> dict | str:
    """The reference step's greedy continuation of a random prompt and its teacher-forced top-2 logits
    on that sequence; or why it could not run."""
    import torch

    a = m.ours.args
    B = plan.agreement_batch
    capacity, P = _agreement_capacity(plan, a.n_positions)
    S, F = plan.agreement_steps, min(plan.free_steps, plan.agreement_steps)
    if P < 1:
        return f"unsupported: {S} compared steps do not fit the model's {a.n_positions} positions"
    prompt = _prompt(B, P, a.vocab_size)
    try:
        ref = sessions.open_session(env.specs[REFERENCE_VARIANT], m, B, capacity, env, keep=False)
        ref.prepare(prompt, plan.warmup_steps)
        for _ in range(S):
            ref.step()
        seq = torch.cat([prompt, ref.generated(P, S + 1)], 1)
        free = ref.generated(P, F + 1)
        ref.set_mode(True, True)
        ref.prepare(seq, plan.warmup_steps, prompt_len=P)
        for _ in range(S):
            ref.step()
        top = ref.top2(P, S)
    except Exception as exc:
        free_cuda_memory()
        return f"{'oom' if is_oom(exc) else 'error'}: reference: {_error_reason(exc)}"
    return {"capacity": capacity, "P": P, "S": S, "F": F, "prompt": prompt, "seq": seq, "free": free, "top": top}


def agreement_order(variants: list[str], specs: dict) -> list[str]:
    """The variants in the order the check runs them, cheapest first, so that a spent budget skips the
    slowest: our CUDA-graph steps take a few seconds for 1,024 positions, the eager loops several times
    that, and transformers' host-bound loop the most (19.5 s of the 23 s a cold H200 had for the check in
    run h200-20261203j, which then skipped the persistent and int8 steps behind it)."""
    def cost(v: str) -> int:
        sp = specs[v]
        return 0 if sp.graph else 2 if sp.host_bound else 1
    return sorted(variants, key=cost)  # stable: the registry's order within each kind


def _agreement_rows(m: _Model, plan: Plan, env: _Env, result: DecodeFile, ref: dict | str, variants,
                    skip: dict[str, str] | None = None) -> None:
    """Teacher-forced top-1 agreement of each variant with the reference step, plus free running. `skip`:
    variants written as skipped, with the reason given."""
    import torch

    B = plan.agreement_batch
    capacity, P = _agreement_capacity(plan, m.ours.args.n_positions)
    bits = {torch.bfloat16: 8, torch.float16: 11, torch.float32: 24}[m.ours.dtype]
    for v in env.progress(list(variants), total=len(variants), desc=f"agreement {m.info.name}"):
        row = AgreementRow(model=m.info.name, variant=v, reference=REFERENCE_VARIANT, batch=B, prompt_len=P,
                           positions=B * plan.agreement_steps, status="ok")
        spec = env.specs[v]
        why = _unsupported(spec, env, timing=False, batch=B)
        if skip and v in skip:
            row.status, row.reason = "skipped", skip[v]
        elif env.deadline.passed():
            row.status, row.reason = "skipped", env.deadline.reason()
        elif isinstance(ref, str):
            row.status, row.reason = ref.split(": ", 1)
        elif why:
            row.status, row.reason = "unsupported", why
        else:
            s = None  # a session an error left bound would outlive the collection below, and be frozen with it
            _clean(env)  # the previous variant's session is gone before this one is built
            try:
                s = sessions.open_session(spec, m, B, capacity, env, keep=spec.compiled)
                s.prepare(ref["prompt"], plan.warmup_steps)
                for _ in range(ref["F"]):
                    s.step()
                for k, val in free_running_fields(s.generated(P, ref["F"] + 1), ref["free"]).items():
                    setattr(row, k, val)
                s.set_mode(True, True)
                s.prepare(ref["seq"], plan.warmup_steps, prompt_len=P)
                for _ in range(ref["S"]):
                    s.step()
                for k, val in agreement_fields(*ref["top"], *s.top2(P, ref["S"]), mantissa_bits=bits).items():
                    setattr(row, k, val)
                del s
            except Exception as exc:
                row.status = "oom" if is_oom(exc) else "error"
                row.reason = _error_reason(exc)
                free_cuda_memory()
        result.agreement.append(row)
        env.save()


def _agreement_shape(m: _Model, plan: Plan):
    """The key shape whose compiled session the agreement check can reuse (same batch and capacity), if any."""
    if not m.plan.agreement:
        return None
    n = m.ours.args.n_positions
    cap, _ = _agreement_capacity(plan, n)
    return next(((b, c) for b, c in m.plan.key_shapes if b == plan.agreement_batch and c + steps_for(n, c, plan.steps) == cap),
                None)


