"""Generators for ADD, SUB, MUL."""

from __future__ import annotations

import numpy as np

from ..case import Case
from ..generate import Gen, generator, real_values

ACTS = ["NONE", "NONE", "NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


def _broadcast_shapes(g: Gen) -> tuple[list[int], list[int]]:
    rank = g.randint(1, 4)
    a = g.dims(rank, 1, 9)
    if g.variant == "broadcast":
        b = [d if g.rng.random() < 0.5 else 1 for d in a]
        if g.rng.random() < 0.3:
            b = b[g.randint(0, rank - 1):]   # lower rank
        if g.rng.random() < 0.5:
            a, b = b, a
        return a, b
    return a, list(a)


def _binary(g: Gen, op: str) -> Case:
    sa, sb = _broadcast_shapes(g)
    a = g.activation(sa, scale=g.scale(2 ** -8, 2 ** -2))
    b = g.activation(sb, scale=g.scale(2 ** -8, 2 ** -2))
    ra, rb = real_values(a), real_values(b)
    if op == "ADD":
        real = ra + rb
    elif op == "SUB":
        real = ra - rb
    else:
        real = ra * rb
    out_shape = list(np.broadcast_shapes(tuple(sa), tuple(sb)))
    s, z = g.output_qparams(real)
    act = g.choice(ACTS) if g.variant == "random" else "NONE"
    out = g.output(out_shape, s, z)
    return Case(op=op, inputs=[a, b], outputs=[out], attrs={"fused_activation_function": act})


@generator("ADD", variants={"broadcast": 3})
def gen_add(g: Gen) -> Case:
    return _binary(g, "ADD")


@generator("SUB", variants={"broadcast": 3})
def gen_sub(g: Gen) -> Case:
    return _binary(g, "SUB")


@generator("MUL", variants={"broadcast": 3})
def gen_mul(g: Gen) -> Case:
    return _binary(g, "MUL")
