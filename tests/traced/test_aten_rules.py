"""The semantics of every registered ``aten.*`` op, checked against torch itself.

Each case builds random inputs, calls ``torch.ops.aten.<name>.<overload>`` with them (tensor
arguments and attributes put back in schema order, as the recorder took them apart), and
compares with the op's rule evaluated by the NumPy backend.  For ops whose Z3 encoding is
fully interpreted (integer arithmetic, linear ops, casts, indexing) the Z3 evaluation on the
same concrete values must give exactly the NumPy values (issue 12, pattern 6).
"""
from __future__ import annotations

import numpy as np
import pytest
import z3

from verifier.backends import NumpyBackend, Z3Backend
from verifier.registry import all_rules, get_rule
from verifier.rules.aten import UNIT, literal

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

F, I, B = "f", "i", "b"


def _make(spec, rng):
    kind, shape = spec[0], spec[1]
    if kind == F:
        return rng.standard_normal(shape)
    if kind == I:
        low, high = spec[2], spec[3]
        values = rng.integers(low, high, size=shape)
        if len(spec) > 4 and spec[4] == "nonzero":
            values[values == 0] = 1
        return values
    return rng.random(shape) < 0.5


def _torch_value(value):
    array = np.asarray(value)
    if array.dtype.kind == "f":
        return torch.tensor(array, dtype=torch.float64)
    if array.dtype.kind == "b":
        return torch.tensor(array, dtype=torch.bool)
    return torch.tensor(array, dtype=torch.int64)


_DTYPES = {"float32": torch.float64, "float64": torch.float64, "int64": torch.int64, "int32": torch.int64,
           "bool": torch.bool}


def call_torch(kind: str, tensors: list, attrs: dict):
    """Rebuild the call from the recording: tensors and attrs back in schema order."""
    _, name, overload = kind.split(".")
    op = getattr(getattr(torch.ops.aten, name), overload)
    positional, keywords = [], {}
    pending = list(tensors)
    lengths = list(attrs.get("list_lengths", []))
    for argument in op._schema.arguments:
        text = str(argument.type)
        if "Tensor" in text:
            if "List" in text or text.endswith("[]"):
                count = lengths.pop(0) if lengths else len(pending)
                value = [_torch_value(t) for t in pending[:count]]
                pending = pending[count:]
            elif argument.name in attrs and attrs[argument.name] is None:
                value = None
            elif text.startswith("Optional") and not pending:
                value = None
            else:
                value = _torch_value(pending.pop(0))
        elif argument.name in attrs:
            value = attrs[argument.name]
            if argument.name == "dtype" and isinstance(value, str):
                value = _DTYPES[value]
            if argument.name == "input_dtype":
                value = torch.float64
        elif argument.has_default_value():
            continue
        else:
            raise AssertionError(f"case for {kind} lacks {argument.name}")
        if argument.kwarg_only:
            keywords[argument.name] = value
        else:
            positional.append(value)
    out = op(*positional, **keywords)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o.detach().numpy() for o in outs if o is not None]


def evaluate(kind: str, tensors: list, attrs: dict, xp=None):
    xp = xp or NumpyBackend()
    with np.errstate(all="ignore"):
        return get_rule(kind).evaluate(xp, list(tensors), dict(attrs), UNIT)


def _same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False
    if want.dtype.kind == "b" or got.dtype.kind == "b":
        return bool(np.array_equal(got.astype(bool), want.astype(bool)))
    if want.dtype.kind in "iu":
        return got.dtype.kind in "iu" and bool(np.array_equal(got, want))
    return bool(np.allclose(got.astype(float), want.astype(float), rtol=1e-6, atol=1e-8))


f23, f34, f234 = (F, (2, 3)), (F, (3, 4)), (F, (2, 3, 4))
POSITIVE = ("pos", (2, 3))

CASES: list[tuple[str, list, dict]] = [
    ("aten.mm.default", [f23, f34], {}),
    ("aten.bmm.default", [(F, (2, 3, 4)), (F, (2, 4, 5))], {}),
    ("aten.matmul.default", [f234, (F, (4,))], {}),
    ("aten.addmm.default", [(F, (4,)), f23, f34], {"beta": 0.5, "alpha": 2.0}),
    ("aten.linear.default", [f234, (F, (5, 4)), (F, (5,))], {}),
    ("aten.linear.default", [f234, (F, (5, 4))], {"bias": None}),
    # convolution: 2-D strided and padded with a bias, dilated without, and 1-D
    ("aten.convolution.default", [(F, (2, 3, 6, 5)), (F, (4, 3, 3, 2)), (F, (4,))],
     {"stride": [2, 1], "padding": [1, 2], "dilation": [1, 1], "transposed": False, "output_padding": [0, 0],
      "groups": 1}),
    ("aten.convolution.default", [(F, (1, 2, 7, 7)), (F, (3, 2, 2, 2))],
     {"bias": None, "stride": [1, 1], "padding": [0, 0], "dilation": [2, 3], "transposed": False,
      "output_padding": [0, 0], "groups": 1}),
    ("aten.convolution.default", [(F, (2, 2, 9)), (F, (3, 2, 3))],
     {"bias": None, "stride": [2], "padding": [1], "dilation": [1], "transposed": False, "output_padding": [0],
      "groups": 1}),
    # grouped: a causal depthwise conv1d (linear-attention layers: channels = groups, padding k - 1)
    # and a 2-D one in 2 groups; the backward of both and of a plain strided one
    ("aten.convolution.default", [(F, (2, 4, 9)), (F, (4, 1, 4)), (F, (4,))],
     {"stride": [1], "padding": [3], "dilation": [1], "transposed": False, "output_padding": [0], "groups": 4}),
    ("aten.convolution.default", [(F, (1, 4, 7, 6)), (F, (6, 2, 2, 3))],
     {"bias": None, "stride": [1, 2], "padding": [0, 1], "dilation": [2, 1], "transposed": False,
      "output_padding": [0, 0], "groups": 2}),
    ("aten.convolution_backward.default", [(F, (2, 4, 12)), (F, (2, 4, 9)), (F, (4, 1, 4))],
     {"bias_sizes": [4], "stride": [1], "padding": [3], "dilation": [1], "transposed": False, "output_padding": [0],
      "groups": 4, "output_mask": [True, True, True]}),
    ("aten.convolution_backward.default", [(F, (1, 6, 5, 3)), (F, (1, 4, 7, 6)), (F, (6, 2, 2, 3))],
     {"bias_sizes": None, "stride": [1, 2], "padding": [0, 1], "dilation": [2, 1], "transposed": False,
      "output_padding": [0, 0], "groups": 2, "output_mask": [True, True, True]}),
    ("aten.convolution_backward.default", [(F, (2, 3, 5)), (F, (2, 2, 9)), (F, (3, 2, 3))],
     {"bias_sizes": [3], "stride": [2], "padding": [1], "dilation": [1], "transposed": False, "output_padding": [0],
      "groups": 1, "output_mask": [True, True, True]}),
    ("aten.flip.default", [f234], {"dims": [-1]}),
    # masked_scatter: the mask broadcast over the last dim (an audio embedding written at its tokens)
    ("aten.masked_scatter.default", [(F, (2, 4, 3)), (B, (2, 4, 1)), (F, (2, 4, 3))], {}),
    ("aten.masked_scatter.default", [(F, (3, 4)), (B, (3, 4)), (F, (13,))], {}),
    ("aten.masked_scatter_backward.default", [(F, (2, 4, 3)), (B, (2, 4, 1))], {"sizes": [3, 3, 3]}),
    ("aten.flip.default", [f234], {"dims": [0, 2]}),
    ("aten.add.Tensor", [f23, f23], {"alpha": 3}),
    ("aten.add.Tensor", [(I, (2, 3), -5, 5), (I, (3,), -5, 5)], {}),
    ("aten.add.Scalar", [f23], {"other": 2.5, "alpha": 2}),
    ("aten.sub.Tensor", [f23, f23], {"alpha": 0.5}),
    ("aten.rsub.Scalar", [f23], {"other": 1.0}),
    ("aten.mul.Tensor", [f23, (F, (3,))], {}),
    ("aten.mul.Tensor", [f23, (B, (2, 3))], {}),
    ("aten.mul.Scalar", [(I, (2, 3), -9, 9)], {"other": 3}),
    ("aten.div.Tensor", [f23, f23], {}),
    ("aten.div.Tensor", [(I, (2, 3), -9, 9), (I, (2, 3), -4, 4, "nonzero")], {}),
    ("aten.div.Scalar", [(I, (2, 3), -9, 9)], {"other": 2}),
    ("aten.div.Tensor_mode", [(I, (2, 3), -9, 9), (I, (2, 3), -4, 4, "nonzero")], {"rounding_mode": "trunc"}),
    ("aten.div.Tensor_mode", [(I, (2, 3), -9, 9), (I, (2, 3), -4, 4, "nonzero")], {"rounding_mode": "floor"}),
    ("aten.div.Tensor_mode", [f23, f23], {"rounding_mode": "trunc"}),
    ("aten.floor_divide.default", [(I, (2, 3), -9, 9), (I, (2, 3), -4, 4, "nonzero")], {}),
    ("aten.remainder.Tensor", [(I, (2, 3), -9, 9), (I, (2, 3), -4, 4, "nonzero")], {}),
    ("aten.remainder.Scalar", [(I, (2, 3), -9, 9)], {"other": -4}),
    # bit operations with a constant that are exact arithmetic (negative values: two's complement)
    ("aten.__rshift__.Scalar", [(I, (3, 5), -40, 40)], {"other": 2}),
    ("aten.bitwise_right_shift.Tensor_Scalar", [(I, (3, 5), -40, 40)], {"other": 0}),
    ("aten.__lshift__.Scalar", [(I, (3, 5), -40, 40)], {"other": 3}),
    ("aten.bitwise_left_shift.Tensor_Scalar", [(I, (3, 5), -40, 40)], {"other": 1}),
    ("aten.__and__.Scalar", [(I, (3, 5), -40, 40)], {"other": 7}),
    ("aten.bitwise_and.Scalar", [(I, (3, 5), -40, 40)], {"other": 1}),
    ("aten.bitwise_and.Scalar", [(B, (3, 5))], {"other": False}),
    ("aten.__and__.Scalar", [(B, (3, 5))], {"other": True}),
    ("aten.pow.Tensor_Scalar", [f23], {"exponent": 2}),
    ("aten.pow.Tensor_Scalar", [f23], {"exponent": 3.0}),
    ("aten.pow.Tensor_Scalar", [POSITIVE], {"exponent": 0.5}),
    ("aten.pow.Tensor_Scalar", [POSITIVE], {"exponent": -1.5}),
    ("aten.neg.default", [f23], {}),
    ("aten.abs.default", [f23], {}),
    ("aten.exp.default", [f23], {}),
    ("aten.log.default", [POSITIVE], {}),
    ("aten.sqrt.default", [POSITIVE], {}),
    ("aten.rsqrt.default", [POSITIVE], {}),
    ("aten.tanh.default", [f23], {}),
    ("aten.cos.default", [f23], {}),
    ("aten.sin.default", [f23], {}),
    ("aten.sigmoid.default", [f23], {}),
    ("aten.silu.default", [f23], {}),
    ("aten.relu.default", [f23], {}),
    ("aten.gelu.default", [f23], {}),
    ("aten.gelu.default", [f23], {"approximate": "tanh"}),
    ("aten.gelu_backward.default", [f23, f23], {}),
    ("aten.gelu_backward.default", [f23, f23], {"approximate": "tanh"}),
    ("aten.silu_backward.default", [f23, f23], {}),
    ("aten.threshold_backward.default", [f23, f23], {"threshold": 0}),
    ("aten.tanh_backward.default", [f23, f23], {}),
    ("aten.sigmoid_backward.default", [f23, f23], {}),
    ("aten.softplus.default", [f23], {"beta": 1, "threshold": 20}),
    ("aten.expm1.default", [f23], {}),
    ("aten.softplus.default", [f23], {"beta": 2.0, "threshold": 0.5}),
    ("aten.softplus_backward.default", [f23, f23], {"beta": 1, "threshold": 20}),
    ("aten.softplus_backward.default", [f23, f23], {"beta": 2.0, "threshold": 0.5}),
    ("aten.log_sigmoid_forward.default", [f234], {}),
    ("aten.all.default", [(B, (2, 3))], {}),
    ("aten.all.default", [(I, (2, 3), 0, 3)], {}),
    ("aten.all.dim", [(B, (2, 3, 4))], {"dim": 1, "keepdim": True}),
    ("aten.all.dims", [f234], {"dim": [0, 2]}),
    ("aten.any.default", [(B, (2, 3))], {}),
    ("aten.any.dim", [(I, (3, 4), 0, 2)], {"dim": 0}),
    ("aten.any.dims", [(B, (2, 3, 4))], {"dim": [1], "keepdim": True}),
    ("aten.lt.Tensor", [f23, f23], {}),
    ("aten.ge.Scalar", [(I, (2, 3), -3, 3)], {"other": 0}),
    ("aten.eq.Scalar", [(I, (2, 3), -3, 3)], {"other": 1}),
    ("aten.ne.Tensor", [(I, (2, 3), 0, 2), (I, (2, 3), 0, 2)], {}),
    ("aten.where.self", [(B, (2, 3)), f23, f23], {}),
    ("aten.masked_fill.Scalar", [f23, (B, (2, 3))], {"value": -1e4}),
    ("aten.masked_fill.Scalar", [(I, (2, 3), 0, 9), (B, (2, 3))], {"value": 0}),
    ("aten.logical_not.default", [(B, (2, 3))], {}),
    ("aten.bitwise_not.default", [(B, (2, 3))], {}),
    ("aten.bitwise_and.Tensor", [(B, (2, 3)), (B, (2, 3))], {}),
    ("aten.clamp.default", [f23], {"min": -0.5, "max": 0.5}),
    ("aten.maximum.default", [f23, f23], {}),
    ("aten.minimum.default", [(I, (2, 3), -3, 3), (I, (2, 3), -3, 3)], {}),
    ("aten._to_copy.default", [f23], {"dtype": "int64"}),
    ("aten._to_copy.default", [(I, (2, 3), -5, 5)], {"dtype": "float32"}),
    ("aten._to_copy.default", [(I, (2, 3), -2, 2)], {"dtype": "bool"}),
    ("aten._to_copy.default", [(B, (2, 3))], {"dtype": "int64"}),
    ("aten.clone.default", [f23], {}),
    ("aten.to.dtype", [f23], {"dtype": "int64"}),
    ("aten.to.dtype_layout", [(I, (2, 3), -4, 4)], {"dtype": "float32"}),
    ("aten.to.device", [(I, (2, 3), -4, 4)], {"device": "cpu", "dtype": "float32"}),
    ("aten.to.other", [f23, (I, (1,), 0, 2)], {}),
    ("aten.detach.default", [f23], {}),
    ("aten.copy_.default", [f23, (F, (3,))], {}),
    ("aten.copy_.default", [(I, (2, 3), 0, 2), f23], {}),
    ("aten.native_dropout.default", [f23], {"p": 0.0, "train": True}),
    ("aten.full.default", [], {"size": [2, 3], "fill_value": 1.5}),
    ("aten.full.default", [], {"size": [2], "fill_value": 3}),
    ("aten.zeros.default", [], {"size": [2, 3]}),
    ("aten.ones.default", [], {"size": [3], "dtype": "int64"}),
    ("aten.zeros_like.default", [(I, (2, 3), 0, 3)], {}),
    ("aten.ones_like.default", [f23], {}),
    ("aten.scalar_tensor.default", [], {"s": 2.5}),
    ("aten.arange.default", [], {"end": 5}),
    ("aten.arange.start", [], {"start": 2, "end": 7}),
    ("aten.arange.start_step", [], {"start": 1, "end": 8, "step": 3}),
    ("aten.arange.start_step", [], {"start": 0.0, "end": 1.0, "step": 0.25}),
    ("aten.tril.default", [(F, (3, 4))], {}),
    ("aten.triu.default", [(F, (2, 3, 4))], {"diagonal": 1}),
    ("aten.t.default", [f23], {}),
    ("aten.transpose.int", [f234], {"dim0": 0, "dim1": -1}),
    ("aten.permute.default", [f234], {"dims": [2, 0, 1]}),
    ("aten.view.default", [f234], {"size": [6, -1]}),
    ("aten._unsafe_view.default", [f234], {"size": [2, 12]}),
    ("aten.reshape.default", [f234], {"shape": [-1]}),
    ("aten.expand.default", [(F, (3, 1))], {"size": [2, 3, 4]}),
    ("aten.expand.default", [(F, (3, 1))], {"size": [-1, 5]}),
    ("aten.unsqueeze.default", [f23], {"dim": -1}),
    ("aten.squeeze.dim", [(F, (2, 1, 3))], {"dim": 1}),
    ("aten.squeeze.dim", [f23], {"dim": 0}),
    ("aten.slice.Tensor", [f234], {"dim": 2, "start": 1, "end": 3}),
    ("aten.slice.Tensor", [f234], {"dim": -1, "start": 0, "end": 9223372036854775807, "step": 2}),
    ("aten.slice.Tensor", [f234], {"dim": 1, "start": -2}),
    ("aten.select.int", [f234], {"dim": 1, "index": -1}),
    ("aten.narrow.default", [f234], {"dim": 2, "start": 1, "length": 2}),
    ("aten.slice_scatter.default", [f234, (F, (2, 3, 2))], {"dim": 2, "start": 2, "end": 4}),
    ("aten.constant_pad_nd.default", [f234], {"pad": [0, 3]}),
    ("aten.constant_pad_nd.default", [f234], {"pad": [1, -1, 2, 0], "value": 1.5}),
    ("aten.select_scatter.default", [f234, (F, (2, 4))], {"dim": 1, "index": 1}),
    ("aten.cat.default", [f23, (F, (1, 3))], {"dim": 0, "list_lengths": [2]}),
    ("aten.stack.default", [f23, f23], {"dim": 1, "list_lengths": [2]}),
    ("aten._chunk_cat.default", [(F, (2, 4, 3)), (F, (2, 6))], {"dim": 1, "num_chunks": 2, "list_lengths": [2]}),
    ("aten.split.Tensor", [(F, (5, 2))], {"split_size": 2}),
    ("aten.split_with_sizes.default", [(F, (2, 5))], {"split_sizes": [1, 4], "dim": 1}),
    ("aten.unbind.int", [f23], {"dim": 1}),
    ("aten.sum.dim_IntList", [f234], {"dim": [0, 2], "keepdim": True}),
    ("aten.sum.dim_IntList", [f234], {"dim": []}),
    ("aten.sum.dim_IntList", [(B, (2, 3))], {"dim": [1]}),
    ("aten.sum.default", [(I, (2, 3), -4, 4)], {}),
    ("aten.mean.dim", [f234], {"dim": [-1], "keepdim": True}),
    ("aten.mean.default", [f234], {}),
    ("aten.amax.default", [f234], {"dim": [1]}),
    ("aten.max.dim", [(I, (3, 4), 0, 3)], {"dim": 1}),
    ("aten.max.dim", [f234], {"dim": 0, "keepdim": True}),
    ("aten.min.dim", [(I, (3, 4), 0, 3)], {"dim": 0}),
    ("aten.max.default", [f23], {}),
    ("aten.amin.default", [f234], {"dim": [2]}),
    ("aten.aminmax.default", [f234], {"dim": 1}),
    ("aten.floor.default", [(F, (3, 4))], {}),
    ("aten.floor.default", [(I, (3,), -5, 5)], {}),
    ("aten.erfinv.default", [("open-unit", (3, 4))], {}),
    ("aten.std.correction", [f234], {"dim": [2], "keepdim": True}),
    ("aten.std.correction", [f234], {"dim": [1], "correction": 0}),
    ("aten.repeat.default", [f23], {"repeats": [2, 1, 3]}),
    ("aten.repeat.default", [(I, (3,), -4, 4)], {"repeats": [2]}),
    ("aten._is_all_true.default", [(B, (2, 3))], {}),
    ("aten.eye.default", [], {"n": 3, "dtype": "float64"}),
    ("aten.eye.m", [], {"n": 2, "m": 4}),
    ("aten.aminmax.default", [f234], {"dim": -1, "keepdim": True}),
    ("aten.aminmax.default", [(I, (3, 4), -9, 9)], {}),
    ("aten.argmax.default", [(I, (3, 4), 0, 3)], {"dim": 1}),
    ("aten.topk.default", [(F, (3, 5))], {"k": 2}),
    # a stable sort of router choices (ties in their first order) and of values, descending along dim 0
    ("aten.sort.stable", [(I, (2, 7), 0, 3)], {"stable": True}),
    ("aten.sort.stable", [(F, (3, 4))], {"stable": True, "dim": 0, "descending": True}),
    ("aten.topk.default", [f234], {"k": 3, "dim": 1, "largest": False}),
    ("aten.topk.default", [(F, (8, 4))], {"k": 4, "dim": -1, "largest": True, "sorted": True}),
    ("aten.var.correction", [f234], {"dim": [2], "keepdim": True}),
    ("aten.var.correction", [f234], {"dim": [1], "correction": 0}),
    ("aten.cumsum.default", [(I, (2, 3), -3, 3)], {"dim": 1}),
    ("aten.index_select.default", [f234, (I, (5,), 0, 3)], {"dim": 1}),
    ("aten.gather.default", [(F, (3, 4)), (I, (3, 2), 0, 4)], {"dim": 1}),
    ("aten.gather.default", [(F, (3, 4)), (I, (2, 4), 0, 3)], {"dim": 0}),
    ("aten.index.Tensor", [(F, (5, 3)), (I, (2, 2), 0, 5)], {"list_lengths": [1]}),
    ("aten.select_backward.default", [(F, (2, 4))], {"input_sizes": [2, 3, 4], "dim": 1, "index": 2}),
    ("aten.slice_backward.default", [(F, (2, 1, 4))], {"input_sizes": [2, 3, 4], "dim": 1, "start": 1, "end": 2,
                                                      "step": 1}),
    ("aten.index_put.default", [(F, (3, 4)), (B, (3, 4)), (F, ())], {"accumulate": False, "list_lengths": [1]}),
    ("aten.index_put.default", [(F, (3, 4)), (B, (3,)), (F, (4,))], {"accumulate": True, "list_lengths": [1]}),
    ("aten.index_put.default", [(F, (5, 3)), (I, (2,), 0, 5), (F, (2, 3))], {"accumulate": True,
                                                                             "list_lengths": [1]}),
    ("aten.index_put_.default", [(F, (5, 3)), ("distinct", (2,), 5), (F, (2, 3))], {"accumulate": False,
                                                                                    "list_lengths": [1]}),
    ("aten.index_add.default", [(F, (5, 3)), (I, (4,), 0, 5), (F, (4, 3))], {"dim": 0, "alpha": 2}),
    ("aten.index_add.default", [(F, (3, 5)), (I, (4,), 0, 5), (F, (3, 4))], {"dim": 1}),
    ("aten.scatter_add.default", [(F, (3, 4)), (I, (3, 2), 0, 4), (F, (3, 2))], {"dim": 1}),
    ("aten.native_dropout_backward.default", [f23, (B, (2, 3))], {"scale": 2.0}),
    ("aten.baddbmm.default", [(F, (2, 3, 5)), (F, (2, 3, 4)), (F, (2, 4, 5))], {"beta": 1, "alpha": 0.5}),
    ("aten.bitwise_or.Tensor", [(B, (2, 3)), (B, (2, 3))], {}),
    ("aten.logical_and.default", [(B, (2, 3)), (B, (2, 3))], {}),
    ("aten.logical_or.default", [(B, (2, 3)), (B, (2, 3))], {}),
    ("aten.clamp_min.default", [f23], {"min": 0.1}),
    ("aten.clamp_max.default", [(I, (2, 3), -5, 5)], {"max": 1}),
    ("aten.copy.default", [f23, f23], {}),
    ("aten.div.Scalar_mode", [(I, (2, 3), -9, 9)], {"other": 4, "rounding_mode": "floor"}),
    ("aten.floor_divide.Scalar", [(I, (2, 3), -9, 9)], {"other": 4}),
    ("aten.eq.Tensor", [(I, (2, 3), 0, 2), (I, (2, 3), 0, 2)], {}),
    ("aten.ge.Tensor", [f23, f23], {}),
    ("aten.gt.Scalar", [f23], {"other": 0.1}),
    ("aten.gt.Tensor", [f23, f23], {}),
    ("aten.le.Scalar", [(I, (2, 3), -3, 3)], {"other": 0}),
    ("aten.le.Tensor", [f23, f23], {}),
    ("aten.lt.Scalar", [f23], {"other": 0.0}),
    ("aten.ne.Scalar", [(I, (2, 3), -2, 2)], {"other": 0}),
    ("aten.expand_as.default", [(F, (3, 1)), (F, (2, 3, 4))], {}),
    ("aten.fill.Scalar", [f23], {"value": 2.0}),
    ("aten.full_like.default", [(I, (2, 3), 0, 2)], {"fill_value": 7}),
    ("aten.new_full.default", [f23], {"size": [4], "fill_value": 7}),
    ("aten.new_ones.default", [f23], {"size": [2, 2]}),
    ("aten.new_zeros.default", [(I, (2, 3), 0, 2)], {"size": [3]}),
    ("aten.masked_fill.Tensor", [f23, (B, (2, 3)), (F, ())], {}),
    ("aten.min.default", [f234], {}),
    ("aten.rsub.Tensor", [f23, f23], {"alpha": 2}),
    ("aten.sub.Scalar", [(I, (2, 3), -9, 9)], {"other": 2}),
    ("aten.squeeze.default", [(F, (1, 3, 1))], {}),
    ("aten.squeeze.dims", [(F, (1, 3, 1))], {"dim": [0, 2]}),
    ("aten.alias.default", [f23], {}),
    ("aten.lift_fresh.default", [f23], {}),
    ("aten.contiguous.default", [f23], {}),
    ("aten._reshape_alias.default", [f234], {"size": [6, 4], "stride": [4, 1]}),
    ("aten.native_layer_norm_backward.default", [f234, f234, ("mean", (2, 3, 1)), ("rstd", (2, 3, 1)),
                                                 (F, (4,)), (F, (4,))],
     {"normalized_shape": [4], "output_mask": [True, True, True]}),
    ("aten.nll_loss_backward.default", [(F, ()), ("log_softmax", (6, 5)), ("ignore", (6,), 5), ("total", ())],
     {"weight": None, "reduction": 1, "ignore_index": -100}),
    ("aten.nll_loss_backward.default", [(F, (6,)), ("log_softmax", (6, 5)), (I, (6,), 0, 5), (F, (5,)), (F, ())],
     {"reduction": 0, "ignore_index": -100}),
    ("aten._scaled_dot_product_flash_attention_for_cpu_backward.default",
     [(F, (1, 2, 4, 3))] * 4 + [("sdpa-out", (1, 2, 4, 3)), ("sdpa-lse", (1, 2, 4))],
     {"dropout_p": 0.0, "is_causal": True, "attn_mask": None}),
    ("aten.native_layer_norm.default", [f234, (F, (4,)), (F, (4,))], {"normalized_shape": [4], "eps": 1e-5}),
    ("aten.native_layer_norm.default", [f234], {"normalized_shape": [3, 4], "weight": None, "bias": None,
                                                "eps": 1e-5}),
    ("aten._softmax.default", [f234], {"dim": -1, "half_to_float": False}),
    ("aten._softmax.default", [f234], {"dim": 1, "half_to_float": False}),
    ("aten._log_softmax.default", [f234], {"dim": -1, "half_to_float": False}),
    ("aten._softmax_backward_data.default", [f234, ("softmax", (2, 3, 4))], {"dim": -1, "input_dtype": "float32"}),
    ("aten._log_softmax_backward_data.default", [f234, ("log_softmax", (2, 3, 4))],
     {"dim": -1, "input_dtype": "float32"}),
    ("aten.nll_loss_forward.default", [("log_softmax", (6, 5)), (I, (6,), 0, 5)],
     {"weight": None, "reduction": 1, "ignore_index": -100}),
    ("aten.nll_loss_forward.default", [("log_softmax", (6, 5)), ("ignore", (6,), 5), (F, (5,))],
     {"reduction": 1, "ignore_index": -100}),
    ("aten.nll_loss_forward.default", [("log_softmax", (6, 5)), (I, (6,), 0, 5)],
     {"weight": None, "reduction": 0, "ignore_index": -100}),
    ("aten.nll_loss_forward.default", [("log_softmax", (6, 5)), (I, (6,), 0, 5)],
     {"weight": None, "reduction": 2, "ignore_index": 3}),
    ("aten.embedding.default", [(F, (5, 3)), (I, (2, 4), 0, 5)], {}),
    ("aten.embedding_dense_backward.default", [(F, (2, 4, 3)), (I, (2, 4), 0, 5)],
     {"num_weights": 5, "padding_idx": -1, "scale_grad_by_freq": False}),
    ("aten.embedding_dense_backward.default", [(F, (2, 4, 3)), (I, (2, 4), 0, 5)],
     {"num_weights": 5, "padding_idx": 2, "scale_grad_by_freq": False}),
    ("aten._scaled_dot_product_flash_attention_for_cpu.default", [(F, (1, 2, 4, 3))] * 3,
     {"dropout_p": 0.0, "is_causal": False}),
    ("aten._scaled_dot_product_flash_attention_for_cpu.default", [(F, (1, 2, 4, 3))] * 3,
     {"dropout_p": 0.0, "is_causal": True, "scale": 0.7}),
]

CASES += [
    ("aten.view_as.default", [f234, (F, (6, 4))], {}),
    ("aten.reshape_as.default", [f234, (F, (4, 6))], {}),
    ("aten.scatter.src", [(F, (3, 4)), (I, (3, 1), 0, 4), (F, (3, 2))], {"dim": 1}),
    ("aten.scatter.src", [(F, (3, 4)), (I, (1, 4), 0, 3), (F, (2, 4))], {"dim": 0}),
    ("aten.scatter.value", [(F, (3, 4)), (I, (3, 1), 0, 4)], {"dim": 1, "value": 0.9}),
    ("aten.scatter.value", [(I, (3, 4), -5, 5), (I, (3, 1), 0, 4)], {"dim": -1, "value": 7}),
    ("aten.scatter_.value", [(F, (3, 4)), (I, (3, 2), 0, 4)], {"dim": 1, "value": -2.5}),   # solar_open's router
    ("aten.where.ScalarOther", [(B, (2, 3)), f23], {"other": -0.5}),
    ("aten.where.ScalarOther", [(B, (2, 3)), f23], {"other": float("-inf")}),
    ("aten.where.ScalarSelf", [(B, (2, 3)), (I, (2, 3), -5, 5)], {"self": 4}),
    ("aten.pow.Scalar", [f23], {"self": 100.0}),   # rotary frequencies: base ** (-arange(d) / d)
    ("aten.pow.Scalar", [(I, (2, 3), -3, 3)], {"self": 2.0}),
    ("aten.reciprocal.default", [POSITIVE], {}),
    ("aten.index.Tensor", [(F, (4, 5)), (I, (3,), 0, 4), (I, (3,), 0, 5)], {"list_lengths": [2]}),
    ("aten.index.Tensor", [(F, (4, 5)), (I, (2, 1), 0, 4), (I, (3,), 0, 5)], {"list_lengths": [2]}),
    ("aten.index.Tensor", [(F, (4, 3, 1)), (I, (5,), 0, 4), (I, (5,), 0, 3)], {"list_lengths": [2]}),   # a router's
    ("aten.index_put.default", [(F, (4, 3, 1)), (I, (5,), 0, 4), (I, (5,), 0, 3), (F, (5, 1))],
     {"accumulate": True, "list_lengths": [2]}),   # the router weights' backward
    ("aten.index_put.default", [(F, (4, 3, 2)), ("distinct", (3,), 4), (I, (3,), 0, 3), (F, (2,))],
     {"accumulate": False, "list_lengths": [2]}),
    ("aten.index.Tensor", [(F, (2, 3, 4, 2)), (I, (2, 1), 0, 2), (I, (3,), 0, 3), (I, (1, 3), 0, 4)],
     {"list_lengths": [3]}),
    ("aten.index_put.default", [(F, (4, 5)), ("distinct", (3,), 4), (I, (3,), 0, 5), (F, (3,))],
     {"accumulate": False, "list_lengths": [2]}),
    ("aten.index_put.default", [(F, (4, 5)), (I, (6,), 0, 4), (I, (6,), 0, 5), (F, (6,))],
     {"accumulate": True, "list_lengths": [2]}),
    ("aten.flatten.using_ints", [f234], {"start_dim": 0, "end_dim": 1}),
    ("aten.flatten.using_ints", [f234], {"start_dim": 1, "end_dim": -1}),
    ("aten.flatten.using_ints", [f234], {}),
    ("aten.as_strided_scatter.default", [(F, (12,)), (F, (2, 3))], {"size": [2, 3], "stride": [1, 4],
                                                                     "storage_offset": 1, "input_contiguous": True,
                                                                     "input_storage_offset": 0}),
    ("aten.chunk.default", [f234], {"chunks": 2, "dim": 2}),
    ("aten.chunk.default", [(F, (7, 3))], {"chunks": 3, "dim": 0}),
    ("aten.chunk.default", [(F, (5, 3))], {"chunks": 4, "dim": 0}),
    ("aten._safe_softmax.default", [f23], {"dim": -1}),
    ("aten._safe_softmax.default", [f234], {"dim": 1}),
    ("aten.mse_loss.default", [f23, f23], {"reduction": 1}),
    ("aten.mse_loss.default", [f23, f23], {"reduction": 2}),
    ("aten.mse_loss.default", [f23, f23], {"reduction": 0}),
    ("aten.mse_loss_backward.default", [(F, ()), f23, f23], {"reduction": 1}),
    ("aten.mse_loss_backward.default", [f23, f23, f23], {"reduction": 0}),
    ("aten.as_strided.default", [f234], {"size": [3, 4], "stride": [4, 1], "storage_offset": 6,
                                         "input_contiguous": True, "input_storage_offset": 0}),
    ("aten.as_strided.default", [(F, (12,))], {"size": [2, 3], "stride": [1, 4], "storage_offset": None,
                                               "input_contiguous": True, "input_storage_offset": 0}),
    ("aten.__and__.Tensor", [(B, (2, 3)), (B, (2, 3))], {}),
    ("aten.__or__.Tensor", [(B, (2, 3)), (B, (2, 3))], {}),
]


def _out_cases():
    """``op(..., out=t)`` for each op with an ``.out`` rule: the op's first case plus an empty
    float64 ``out`` (torch resizes it; the result takes its dtype)."""
    from verifier.rules.aten import OUT_VARIANTS
    firsts = {}
    for kind, specs, attrs in CASES:
        name, overload = kind.split(".")[1:]
        if name in OUT_VARIANTS and overload in ("default", "Tensor"):
            firsts.setdefault(name, (f"aten.{name}.out", specs + [(F, (0,))], attrs))
    return list(firsts.values())


CASES += _out_cases()


def _inputs(specs, rng):
    out = []
    for spec in specs:
        if spec[0] == "pos":
            out.append(rng.random(spec[1]) + 0.5)
        elif spec[0] == "open-unit":   # (-1, 1): erfinv's domain
            out.append(rng.random(spec[1]) * 1.98 - 0.99)
        elif spec[0] in ("softmax", "log_softmax"):
            values = torch.tensor(rng.standard_normal(spec[1]))
            soft = torch.softmax(values, -1) if spec[0] == "softmax" else torch.log_softmax(values, -1)
            out.append(soft.numpy())
        elif spec[0] in ("mean", "total"):
            out.append(rng.standard_normal(spec[1]) * 0.1 if spec[0] == "mean" else np.array(4.0))
        elif spec[0] == "rstd":
            out.append(rng.random(spec[1]) + 0.5)
        elif spec[0] in ("sdpa-out", "sdpa-lse"):  # the forward's saved state, for its backward
            q, k, v = (torch.tensor(a) for a in out[1:4])
            saved = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, 0.0, True)
            out.append(saved[0 if spec[0] == "sdpa-out" else 1].numpy())
        elif spec[0] == "distinct":
            out.append(rng.permutation(spec[2])[:spec[1][0]])
        elif spec[0] == "ignore":
            values = rng.integers(0, spec[2], size=spec[1])
            values[0] = -100
            out.append(values)
        else:
            out.append(_make(spec, rng))
    return out


def _case_id(case):
    kind, specs, attrs = case
    return kind.replace("aten.", "") + "-" + "-".join(f"{k}={v}" for k, v in attrs.items() if k != "list_lengths")


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_numpy_semantics_equal_torch(case):
    kind, specs, attrs = case
    rng = np.random.default_rng(abs(hash(_case_id(case))) % 2**32)
    inputs = _inputs(specs, rng)
    want = call_torch(kind, inputs, {k: v for k, v in attrs.items()})
    got = evaluate(kind, inputs, {k: v for k, v in attrs.items() if k != "list_lengths"})
    mask = [True] * len(want)
    assert len(got) == len(want), f"{kind}: {len(got)} results, torch gives {len(want)}"
    for index, (g, w) in enumerate(zip(got, want)):
        if mask[index]:
            assert _same(g, w), f"{kind} result {index}: ours {np.asarray(g).tolist()} torch {w.tolist()}"


def _interpreted(kind: str) -> bool:
    """Ops whose Z3 encoding has no uninterpreted function: Z3 must compute the exact numbers."""
    nonlinear = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "softmax", "layer_norm",
                 "nll_loss", "scaled_dot", "pow.Tensor_Scalar", "pow.Scalar", "cos.", "sin.", "softplus", "expm1", "erfinv", "std.")
    return not any(word in kind for word in nonlinear)


def _z3_value(term):
    value = z3.simplify(term) if isinstance(term, z3.ExprRef) else term
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return value
    if z3.is_true(value) or z3.is_false(value):
        return z3.is_true(value)
    if z3.is_int_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        return value.numerator_as_long() / value.denominator_as_long()
    raise AssertionError(f"Z3 term did not evaluate to a number: {value}")


def _symbolic_literal(xp, array):
    array = np.asarray(array)
    kind = "bool" if array.dtype.kind == "b" else "int" if array.dtype.kind in "iu" else "float"
    return literal(xp, array, kind)


# an infinite constant is a named unknown in Z3 (verifier.rules.aten.scalar_term), not a number
Z3_CASES = [c for c in CASES if _interpreted(c[0])
            and not any(isinstance(v, float) and not np.isfinite(v) for v in c[2].values())]


@pytest.mark.parametrize("case", Z3_CASES, ids=[_case_id(c) for c in Z3_CASES])
def test_z3_encoding_equals_numpy_on_concrete_values(case):
    kind, specs, attrs = case
    rng = np.random.default_rng(7)
    inputs = _inputs(specs, rng)
    attrs = {k: v for k, v in attrs.items() if k != "list_lengths"}
    want = evaluate(kind, inputs, attrs)
    xp = Z3Backend()
    got = evaluate(kind, [_symbolic_literal(xp, a) for a in inputs], attrs, xp)
    for g, w in zip(got, want):
        g = np.asarray(g, dtype=object)
        assert g.shape == np.shape(w)
        values = np.array([_z3_value(t) for t in g.reshape(-1)]).reshape(g.shape)
        w = np.asarray(w)
        if w.dtype.kind in "iub":
            assert np.array_equal(values.astype(w.dtype), w), f"{kind}: z3 {values.tolist()} numpy {w.tolist()}"
            assert all(isinstance(v, (bool, np.bool_)) == (w.dtype.kind == "b") for v in values.reshape(-1))
        else:
            assert np.allclose(values.astype(float), w, rtol=1e-9, atol=1e-12), kind


def test_float_to_int_truncates_toward_zero_in_z3():
    xp = Z3Backend()
    x = literal(xp, np.array([-2.7, -0.5, 0.5, 2.7]), "float")
    (out,) = evaluate("aten._to_copy.default", [x], {"dtype": "int64"}, xp)
    assert [_z3_value(t) for t in out] == [-2, 0, 0, 2]


def test_integer_true_division_is_not_floored_in_z3():
    xp = Z3Backend()
    a, b = literal(xp, np.array([7, -7]), "int"), literal(xp, np.array([2, 2]), "int")
    (out,) = evaluate("aten.div.Tensor", [a, b], {}, xp)
    assert [_z3_value(t) for t in out] == [3.5, -3.5]


@pytest.mark.parametrize("kind,other", [("aten.__and__.Scalar", 6), ("aten.__rshift__.Scalar", -1)])
def test_a_bit_operation_that_is_not_arithmetic_is_refused(kind, other):
    from verifier.rules.aten import AtenUnsupported
    with pytest.raises(AtenUnsupported, match="bitwise"):
        evaluate(kind, [np.arange(4)], {"other": other})


def test_transposed_convolution_is_refused():
    from verifier.rules.aten import AtenUnsupported
    for attrs in ({"transposed": True},):
        with pytest.raises(AtenUnsupported, match="convolution"):
            evaluate("aten.convolution.default", [np.ones((1, 2, 4, 4)), np.ones((2, 1, 2, 2))],
                     {"bias": None, "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], **attrs})


def test_dropout_with_nonzero_p_is_refused():
    from verifier.rules.aten import AtenUnsupported
    with pytest.raises(AtenUnsupported, match="dropout"):
        evaluate("aten.native_dropout.default", [np.ones((2, 2))], {"p": 0.1, "train": True})


def test_every_listed_op_has_a_case():
    """New aten rules come with a torch comparison (in-place twins share their op's case)."""
    covered = {c[0] for c in CASES}
    registered = {k for k in all_rules() if k.startswith("aten.") and "_." not in k.split(".")[1] + "."}
    missing = sorted(registered - covered - UNTESTED_BY_DESIGN - COMPARED_IN_THEIR_OWN_TEST)
    assert not missing, f"aten rules without a torch comparison: {missing}"


UNTESTED_BY_DESIGN = {
    # random or uninitialised values: no torch value to compare with
    "aten.empty.memory_format", "aten.empty_like.default", "aten.new_empty.default", "aten.empty_strided.default",
    "aten.new_empty_strided.default",
}


# ops whose inputs torch relates (a backward's buffer is a function of its input): compared below
COMPARED_IN_THEIR_OWN_TEST = {"aten.log_sigmoid_backward.default", "aten.nonzero.default", "aten.bincount.default",
                              "aten.repeat_interleave.Tensor"}


def test_log_sigmoid_backward_equals_torch_given_the_buffer_its_forward_made():
    rng = np.random.default_rng(3)
    x, grad = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    out, buffer = torch.ops.aten.log_sigmoid_forward.default(torch.tensor(x))
    want = torch.ops.aten.log_sigmoid_backward.default(torch.tensor(grad), torch.tensor(x), buffer)
    (got,) = evaluate("aten.log_sigmoid_backward.default", [grad, x, buffer.numpy()], {})
    assert np.allclose(got, want.numpy(), rtol=1e-9, atol=1e-12)


def test_as_strided_of_a_tensor_not_in_memory_order_is_refused():
    from verifier.rules.aten import AtenUnsupported
    with pytest.raises(AtenUnsupported, match="memory order"):
        evaluate("aten.as_strided.default", [np.ones((2, 3))], {"size": [3], "stride": [1], "storage_offset": 0,
                                                               "input_contiguous": False})


def test_safe_softmax_gives_zero_for_a_row_that_is_entirely_minus_infinity():
    x = np.array([[0.5, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    (ours,) = evaluate("aten._safe_softmax.default", [x], {"dim": -1})
    want = torch.ops.aten._safe_softmax.default(torch.tensor(x), -1).numpy()
    assert np.allclose(ours, want) and not np.any(ours[1])


def test_fsdp2_packing_ops_match_torch():
    """FSDP2's own ops (all-gather copy-in, split copy-out, chunk_cat for the reduce-scatter),
    against their CPU kernels; the written ``out`` arguments are the rules' results."""
    pytest.importorskip("torch.distributed.fsdp._fully_shard._fsdp_collectives")
    rng = np.random.default_rng(3)
    weight, bias = rng.standard_normal((3, 4)), rng.standard_normal(2)
    output = torch.zeros(28, dtype=torch.float64)
    piece, whole = torch.ops.fsdp.all_gather_copy_in([torch.tensor(weight.reshape(-1)), torch.tensor(bias)], output,
                                                    [12, 2], 14, 1)
    ours = evaluate("fsdp.all_gather_copy_in.default", [weight.reshape(-1), bias, np.zeros(28)],
                    {"inp_split_sizes": [12, 2], "all_gather_input_numel": 14, "rank": 1})
    assert np.allclose(ours[0], piece.numpy()) and np.allclose(ours[1], whole.numpy())

    gathered = rng.standard_normal((2, 14))
    outs = [torch.empty(2, 12, dtype=torch.float64), torch.empty(2, 2, dtype=torch.float64)]
    torch.ops.fsdp.split_with_sizes_copy(torch.tensor(gathered), [12, 2], dim=1, out=outs)
    ours = evaluate("fsdp.split_with_sizes_copy.default", [gathered, np.zeros((2, 12)), np.zeros((2, 2))],
                    {"all_gather_input_split_sizes": [12, 2], "dim": 1})
    assert all(np.allclose(a, b.numpy()) for a, b in zip(ours, outs))

    grads = [rng.standard_normal((4, 3)), rng.standard_normal(4)]
    out = torch.empty(2, 8, dtype=torch.float64)
    torch.ops.fsdp.chunk_cat([torch.tensor(g) for g in grads], 0, 2, out=out)
    (ours,) = evaluate("fsdp.chunk_cat.default", [*grads, np.zeros((2, 8))], {"dim": 0, "num_chunks": 2})
    assert np.allclose(ours, out.numpy())


@pytest.mark.parametrize("values", [[[0, 1.5, 0], [2, 0, -1]], [True, False, True, True], [[0.0, 0.0]], [[[1, 0], [0, 3]]]])
def test_nonzero_equals_torch_given_the_recorded_count_in_numpy_and_z3(values):
    """nonzero's size is data-dependent: the recording gives the count, the rule the coordinates."""
    x = np.asarray(values)
    want = torch.nonzero(torch.tensor(x)).numpy()
    got = evaluate("aten.nonzero.default", [x], {"count": len(want)})
    assert np.asarray(got[0]).shape == want.shape and np.array_equal(np.asarray(got[0]), want)
    xp = Z3Backend()
    symbolic = evaluate("aten.nonzero.default", [_symbolic_literal(xp, x)], {"count": len(want)}, xp)[0]
    assert np.array_equal(np.array([[_z3_value(t) for t in row] for row in symbolic]).reshape(want.shape), want)


@pytest.mark.parametrize("kind, values, weights", [
    ("aten.bincount.default", [3, 0, 1, 0, 3, 3], None),
    ("aten.bincount.default", [2, 0, 2, 1], [0.5, -1.0, 2.0, 3.0]),
    ("aten.repeat_interleave.Tensor", [2, 0, 3, 1], None),
])
def test_counts_and_repeats_equal_torch_given_the_recorded_size_in_numpy_and_z3(kind, values, weights):
    """bincount's and repeat_interleave's sizes are data-dependent: the recording gives them (``count``)."""
    x = np.asarray(values)
    if kind == "aten.bincount.default":
        want = torch.bincount(torch.tensor(x), None if weights is None else torch.tensor(weights)).numpy()
    else:
        want = torch.repeat_interleave(torch.tensor(x)).numpy()
    args = [x] + ([np.asarray(weights)] if weights is not None else [])
    (got,) = evaluate(kind, args, {"count": len(want)})
    assert _same(got, want), (np.asarray(got).tolist(), want.tolist())
    xp = Z3Backend()
    (symbolic,) = evaluate(kind, [_symbolic_literal(xp, a) for a in args], {"count": len(want)}, xp)
    assert np.allclose(np.array([_z3_value(t) for t in symbolic], dtype=float), want)
