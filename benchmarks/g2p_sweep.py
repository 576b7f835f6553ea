"""Chapter 6's G2P transformer, other recipes at the recorded run's budget, on a GPU (issue 30).

The recorded run (``python -m nlpcourse.transformer_runs g2p --threads 2``) may train for at
most an hour on two CPU cores, which buys a fixed number of steps of each recipe (about 3,300 s
of training over the CPU time of one step). This script trains several recipes for that many
steps each, on a GPU, to ask whether another recipe would have come closer to the goal (greedy
WER <= 24% without stress). It is not part of the tests or the build (CI has no GPU); its result
is the record ``book/results/transformer_g2p_sweep.json``, which chapter 6 reads::

    python benchmarks/g2p_sweep.py prep                 # here: the split, to .sweep/data.pt
    python benchmarks/g2p_sweep.py run OUT 7.7          # on the GPU: OUT/results.jsonl
    python benchmarks/g2p_sweep.py record OUT "MACHINE" # here: the record

Each recipe is :class:`nlpcourse.transformer.Seq2SeqTransformer` with the loss of its ``loss``
(label smoothing, eq. (tf-ls)), chapter 5's batches (:func:`nlpcourse.seq2seq.make_batches`'
order, batches of fewer than 128 pairs dropped), AdamW (Adam when ``wd`` = 0), clipping and
the linear decay of :func:`nlpcourse.seq2seq.train`. To be fast on a GPU, the whole step
(gather the batch, forward, backward, clip, AdamW, the moving average of the weights) is one
CUDA graph, replayed; the batches are padded to the longest word of the split, and two
functions are replaced by versions without a data-dependent branch (``padding_mask`` without
its checks, ``fused_attention`` without its test for queries with no key, which training never
has). Several recipes train at once, each on its own stream, until their steps are done or the
``minutes`` run out (a recipe stopped early says so). At the end each is scored on the whole
validation split (never the test split) by batched greedy decoding, with its last weights and
with their exponential moving average (decay 0.999).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import nlpcourse.transformer as tfm  # noqa: E402
from nlpcourse import seq2seq as s2s  # noqa: E402
from nlpcourse.transformer_runs import rates_of  # noqa: E402

DATA = Path(".sweep/data.pt")  # the split as ids, made here by `prep` (no CMUdict on the GPU)
RECORD = "transformer_g2p_sweep"
CPU_SECONDS = 3300.0  # training seconds in the recorded run's hour (the rest: validation, test)

# name, model (D, heads H, blocks a side L, D_ff), dropout, label smoothing, peak learning rate,
# steps: at most CPU_SECONDS over the time of one step with 2 threads on the idle 2-core machine
# (d = 192: 0.091 s without dropout, 0.137 s with; d = 256: 0.149 s without, from the record's
# trials; dropout's share assumed proportional for the others, so d = 256 with dropout was put
# at 0.22 s and given 16,000 steps: measured after the sweep, it takes 0.183 s, 18,000 steps in
# the hour). In the order they start.
CONFIGS: list[dict[str, Any]] = [
    dict(name="base_d192_nodrop", D=192, H=4, L=2, ff=768, drop=0.0, ls=0.1, lr=2e-3,
         steps=30000, eval_every=10000),
    dict(name="d192_drop0.1", D=192, H=4, L=2, ff=768, drop=0.1, ls=0.1, lr=2e-3, steps=24000,
         eval_every=8000),
    dict(name="d192_drop0.2", D=192, H=4, L=2, ff=768, drop=0.2, ls=0.1, lr=2e-3, steps=24000),
    dict(name="d256_drop0.1", D=256, H=4, L=2, ff=1024, drop=0.1, ls=0.1, lr=2e-3, steps=16000),
    dict(name="d192_nodrop_wd0.1_ls0.2", D=192, H=4, L=2, ff=768, drop=0.0, ls=0.2, lr=2e-3,
         wd=0.1, steps=30000),
    dict(name="d192_drop0.1_30k", D=192, H=4, L=2, ff=768, drop=0.1, ls=0.1, lr=2e-3,
         steps=30000),
    dict(name="d192_3+3_drop0.1", D=192, H=4, L=3, ff=768, drop=0.1, ls=0.1, lr=2e-3,
         steps=15000),
    dict(name="d128_drop0.1", D=128, H=4, L=2, ff=512, drop=0.1, ls=0.1, lr=3e-3, steps=36000),
    dict(name="d192_drop0.1_lr3e-3_wu1k", D=192, H=4, L=2, ff=768, drop=0.1, ls=0.1, lr=3e-3,
         warmup=1000, steps=24000),
    dict(name="d256_drop0.2", D=256, H=4, L=2, ff=1024, drop=0.2, ls=0.1, lr=2e-3, steps=16000),
    dict(name="ceiling_d256_3+3_drop0.2_60k", D=256, H=4, L=3, ff=1024, drop=0.2, ls=0.1,
         lr=2e-3, steps=60000, eval_every=15000),
    dict(name="d192_drop0.3", D=192, H=4, L=2, ff=768, drop=0.3, ls=0.1, lr=2e-3, steps=24000),
]  # fmt: skip


def prep() -> None:
    """The training pairs, the validation split and the vocabularies, to :data:`DATA`."""
    from nlpcourse.data import cmudict_split

    train, valid, _ = cmudict_split()
    src, tgt = s2s.g2p_vocabs(train)
    pairs = s2s.g2p_pairs(train, src, tgt)
    DATA.parent.mkdir(exist_ok=True)
    torch.save({"pairs": pairs, "valid": valid, "src_vocab": src, "tgt_vocab": tgt}, DATA)
    print(f"{len(pairs):,} training pairs, {len(valid):,} validation words -> {DATA}")


def padding_mask(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """``nlpcourse.transformer.padding_mask`` without its checks (which read the GPU)."""
    return (torch.arange(T, device=lengths.device) < lengths[:, None])[:, None, None, :]


def fused_attention(q, k, v, mask=None, causal=False):  # type: ignore[no-untyped-def]
    """``nlpcourse.transformer.fused_attention`` without its test for queries with no key."""
    T_q, T_k = q.shape[-2], k.shape[-2]
    if causal and T_q == T_k:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if causal and T_q > 1:
        mask = tfm.causal_mask_last(T_q, T_k, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class Run:
    """One recipe: its model, optimiser, batches, schedule and (on a GPU) its captured step."""

    def __init__(self, cfg: dict[str, Any], data: dict[str, Any], device: torch.device):
        self.cfg, self.device = cfg, device
        self.src_v, self.tgt_v = data["src_vocab"], data["tgt_vocab"]
        torch.manual_seed(cfg.get("seed", 0))
        self.model = tfm.Seq2SeqTransformer(
            len(self.src_v), len(self.tgt_v), cfg["ls"], D=cfg["D"], H=cfg["H"],
            n_layers=cfg["L"], D_ff=cfg["ff"], dropout=cfg["drop"], max_len=64,
        ).to(device)  # fmt: skip
        self.allowed = int((~self.model.never).sum())
        pairs = data["pairs"]
        self.src_all = s2s.pad_batch([s for s, _ in pairs]).to(device)  # (N, S_max)
        self.tgt_all = s2s.pad_batch([t for _, t in pairs]).to(device)  # (N, T_max + 2)
        self.src_len = torch.tensor([len(s) for s, _ in pairs])
        self.B, self.steps = cfg.get("batch", 128), cfg["steps"]
        self.gen = torch.Generator().manual_seed(cfg.get("seed", 0))
        lr, N, W = cfg["lr"], self.steps, cfg.get("warmup", 0)
        share = [s2s.linear_decay(i, N) for i in range(1, N + 1)]  # chapter 5's decay
        sched = lr * torch.tensor(share, dtype=torch.float64)  # (N,)
        if W:  # and a linear warm-up over the first W steps
            t = torch.arange(1, N + 1, dtype=torch.float64)
            sched = torch.minimum(sched, lr * t / W)
        self.sched = sched.float().to(device)  # (N,)
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.params = list(self.model.parameters())
        self.lr_t = torch.tensor(lr, device=device)
        cap = device.type == "cuda"
        self.opt = torch.optim.AdamW(
            self.params, lr=self.lr_t if cap else lr, weight_decay=cfg.get("wd", 0.0),
            capturable=cap, foreach=True,
        )  # fmt: skip
        self.ema_decay = cfg.get("ema", 0.999)
        self.ema = [p.detach().clone() for p in self.params]
        self.idx = torch.zeros(self.B, dtype=torch.long, device=device)  # the batch's rows
        self.loss_sum = torch.zeros((), device=device)
        self.t, self.t_logged = 0, 0
        self.epoch: torch.Tensor | None = None
        self.j = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.log: list[dict[str, Any]] = []
        self.start = time.time()

    def loss(self) -> torch.Tensor:
        """``Seq2SeqTransformer.loss`` of the batch ``idx``, padded to the longest word."""
        src, tgt = self.src_all[self.idx], self.tgt_all[self.idx]
        logp = self.model.log_probs(src, tgt[:, :-1])  # (B, T, V)
        gold = tgt[:, 1:]  # (B, T)
        nll = -logp.gather(-1, gold.unsqueeze(-1)).squeeze(-1)  # (B, T)
        ls = self.cfg["ls"]
        if ls:
            uniform = -logp.masked_fill(self.model.never, 0.0).sum(-1) / self.allowed
            nll = (1 - ls) * nll + ls * uniform  # (tf-ls)
        real = gold != 0
        return torch.where(real, nll, 0.0).sum() / real.sum()

    def body(self) -> None:
        loss = self.loss()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.cfg.get("clip", 1.0), foreach=True)
        self.opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(self.ema, [p.detach() for p in self.params], 1 - self.ema_decay)
            self.loss_sum.add_(loss.detach())

    def next_batch(self) -> torch.Tensor:
        """The next batch's rows, in :func:`nlpcourse.seq2seq.make_batches`' order: shuffle,
        sort chunks of 50 batches by source length, cut, shuffle the batches."""
        if self.epoch is None or self.j >= len(self.epoch):
            order = torch.randperm(len(self.src_len), generator=self.gen)
            chunk = 50 * self.B
            batches = []
            for a in range(0, len(order), chunk):
                part = order[a : a + chunk]
                part = part[torch.argsort(self.src_len[part], stable=True)]
                for b in range(0, len(part) - self.B + 1, self.B):
                    batches.append(part[b : b + self.B])
            perm = torch.randperm(len(batches), generator=self.gen)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.epoch = torch.stack([batches[i] for i in perm.tolist()]).to(self.device)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.j = 0
        row = self.epoch[self.j]
        self.j += 1
        return row

    def capture(self) -> None:
        """Three steps on a side stream (as CUDA graphs ask), then capture the fourth."""
        dev = self.device
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(3):
                self.idx.copy_(self.next_batch())
                self.lr_t.fill_(float(self.sched[self.t]))
                self.opt.zero_grad(set_to_none=True)
                self.body()
                self.t += 1
        torch.cuda.current_stream(dev).wait_stream(side)
        self.opt.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.body()
        self.graph = graph
        self.loss_sum.zero_()
        self.t_logged = self.t

    def step(self) -> None:
        if self.graph is not None:
            with torch.cuda.stream(self.stream):
                self.idx.copy_(self.next_batch(), non_blocking=True)
                self.lr_t.copy_(self.sched[self.t], non_blocking=True)
                self.graph.replay()
        else:
            self.idx.copy_(self.next_batch())
            for group in self.opt.param_groups:
                group["lr"] = float(self.sched[self.t])
            self.opt.zero_grad(set_to_none=True)
            self.body()
        self.t += 1

    def done(self) -> bool:
        return self.t >= self.steps

    @torch.no_grad()
    def evaluate(self, valid: dict[str, list[s2s.Pron]], use_ema: bool) -> dict[str, float]:
        """Greedy WER/PER on ``valid``, with and without stress, all words at once."""
        if self.stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
        m = self.model
        saved = None
        if use_ema:
            saved = [p.detach().clone() for p in self.params]
            for p, e in zip(self.params, self.ema, strict=True):
                p.data.copy_(e)
        m.eval()
        words = list(valid)
        preds = []
        for a in range(0, len(words), 2048):
            ws = words[a : a + 2048]
            src = s2s.pad_batch([self.src_v.encode(w) for w in ws]).to(self.device)  # (B, S)
            lens = (src != 0).sum(1)
            memory = m.encode(src, lens)  # (B, S, D)
            ys = torch.full((len(ws), 1), s2s.BOS_ID, device=self.device)  # (B, 1)
            done = torch.zeros(len(ws), dtype=torch.bool, device=self.device)
            for _ in range(30):
                logits = m.decode(ys, memory, lens)[:, -1]  # (B, V)
                nxt = logits.masked_fill(m.never, -math.inf).argmax(-1)  # (B,)
                ys = torch.cat([ys, nxt[:, None]], 1)
                done |= nxt == s2s.EOS_ID
                if bool(done.all()):
                    break
            for row in ys[:, 1:].tolist():
                out = []
                for i in row:
                    if i == s2s.EOS_ID:
                        break
                    out.append(i)
                preds.append(self.tgt_v.decode(out))
        m.train()
        if saved is not None:
            for p, e in zip(self.params, saved, strict=True):
                p.data.copy_(e)
        if self.stream is not None:
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
        rates = rates_of({"words": words, "predictions": preds}, valid)  # chapter 6's scoring
        return dict(wer=rates["wer"], per=rates["per"], wer_ns=rates["wer_no_stress"],
                    per_ns=rates["per_no_stress"])  # fmt: skip


def run(out: str, minutes: float, configs: list[dict[str, Any]], width: int = 6) -> None:
    """Train ``configs``, ``width`` at a time, for at most ``minutes``; one line of
    ``out/results.jsonl`` per recipe."""
    deadline = time.time() + 60 * minutes
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = torch.load(DATA, weights_only=False)
    valid = data["valid"]
    pending = list(configs)
    active: list[Run] = []
    results = open(os.path.join(out, "results.jsonl"), "a")
    logfile = open(os.path.join(out, "log.txt"), "a")

    def log(*parts: Any) -> None:
        msg = " ".join(str(x) for x in parts)
        print(msg, flush=True)
        logfile.write(msg + "\n")
        logfile.flush()

    def finish(r: Run, why: str) -> None:
        res = dict(r.cfg, trained=r.t, why=why, minutes=round((time.time() - r.start) / 60, 2),
                   curve=r.log)  # fmt: skip
        try:
            res["final"] = r.evaluate(valid, False)
            res["ema"] = r.evaluate(valid, True)
        except Exception as e:  # a recipe's failure is reported, the others go on
            res["eval_error"] = repr(e)
        log("DONE", json.dumps({k: v for k, v in res.items() if k != "curve"}))
        results.write(json.dumps(res) + "\n")
        results.flush()

    while pending or active:
        while pending and len(active) < width and time.time() < deadline - 30:
            cfg = pending.pop(0)
            try:
                r = Run(cfg, data, device)
                if device.type == "cuda":
                    try:
                        r.capture()
                    except Exception as e:  # then it trains without the graph
                        log("capture failed", cfg["name"], repr(e)[:300])
                        r.graph = None
                        torch.cuda.synchronize()
                active.append(r)
                log("start", cfg["name"], "graph" if r.graph else "eager")
            except Exception as e:
                log("build failed", cfg["name"], repr(e)[:500])
        for r in list(active):
            r.step()
            every = r.cfg.get("eval_every", 0)
            if r.t % 1000 == 0:
                if r.stream is not None:
                    r.stream.synchronize()
                n = r.t - r.t_logged
                point: dict[str, Any] = {"step": r.t, "loss": float(r.loss_sum) / max(n, 1),
                                         "sec": round(time.time() - r.start, 1)}  # fmt: skip
                r.loss_sum.zero_()
                r.t_logged = r.t
                if every and r.t % every == 0:
                    point["ema"] = r.evaluate(valid, True)
                r.log.append(point)
                if r.t % 5000 == 0:
                    log(r.cfg["name"], json.dumps(point))
            if r.done() or time.time() > deadline:
                active.remove(r)
                finish(r, "done" if r.done() else "deadline")
    log("all finished")


def record(out: str, machine: str, date: str, commit: str, minutes: float) -> Path:
    """``out/results.jsonl`` of a `run` as the record ``book/results/<RECORD>.json``."""
    from nlpcourse.records import RESULTS_DIR

    runs = [json.loads(line) for line in open(os.path.join(out, "results.jsonl"))]
    rec = {
        "name": RECORD,
        "command": f"python benchmarks/g2p_sweep.py run OUT {minutes:g}",
        "config": {"cpu_seconds": CPU_SECONDS, "minutes": minutes, "configs": CONFIGS},
        "commit": commit,
        "date": date,
        "machine": machine,
        "minutes": minutes,
        "metrics": {"runs": runs},
        "curve": [],
    }
    path = RESULTS_DIR / f"{RECORD}.json"
    path.write_text(json.dumps(rec, indent=1) + "\n")
    return path


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "prep":
        prep()
    elif what == "run":
        run(sys.argv[2], float(sys.argv[3]), CONFIGS, int(os.environ.get("SWEEP_WIDTH", "6")))
    elif what == "record":
        print(record(*sys.argv[2:6], float(sys.argv[6])))
    else:
        sys.exit(__doc__)
