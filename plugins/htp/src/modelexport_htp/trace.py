"""The trace half of HTP: run the model once and record every torch operation with its module stack.

Forward pre/post hooks on every module keep a stack of the modules executing; a
``TorchFunctionMode`` sees every torch call (functions, tensor methods, factories: no
list of ops) and records, for each call that returns tensors, the module stack at that
moment, which earlier records produced its tensor inputs, which parameters it read and
its outputs (copied only when a later call is about to write into them). Those values are
what the projection compares ONNX values with.
The only calls known by name are the few that change no value and that exporters
write no node for (dropout in eval, ``contiguous``): the projection passes over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import torch

    from modelexport_core.sdk import ExportContext

from modelexport_core.sdk import as_exported, tensors_in

INPUT_PREFIX = "input:"
"""Records of the model inputs have this op name followed by the input's name."""

DROPPED_CALLS = frozenset({"contiguous", "detach", "clone"})
"""Calls that change no value and that no exporter writes a node for (with any dropout in eval)."""

VALUE_READS = frozenset({"tolist", "item", "__int__", "__float__", "__bool__", "__index__"})
"""Calls that read a tensor's elements into Python numbers."""


@dataclass
class OpRecord:
    """One torch call seen during the trace."""

    index: int
    op: str
    stack: tuple[str, ...]
    """Qualified names (of the user's model) of the modules executing, outermost first."""
    inputs: tuple[int, ...]
    """Indices of the records whose outputs this call read."""
    params: tuple[str, ...]
    """Qualified names of the parameters and buffers this call read."""
    outputs: list["np.ndarray"] = field(default_factory=list)
    alias: bool = False
    """The call returned one of its inputs unchanged (``.to`` to the same dtype, dropout in eval)."""
    shape_read: bool = False
    """The call read a tensor's shape (``.shape``, ``.size()``); its output is that shape as integers."""
    read_dim: int | None = None
    """For a shape read of one extent (``x.size(-1)``), the dimension as written; ``None`` for the whole shape."""

    @property
    def dropped(self) -> bool:
        """A call exporters write no node for in inference: dropout, ``contiguous``, ``detach``, ``clone``."""
        last = self.op.rpartition(".")[2].strip("_").lower()
        return "dropout" in last or last in DROPPED_CALLS

    @property
    def module(self) -> str:
        """The innermost module executing when the call was made ('' is the root)."""
        return self.stack[-1] if self.stack else ""


@dataclass
class Trace:
    """Everything one traced run recorded."""

    records: list[OpRecord]
    execution_trace: list[str]
    """Qualified names of the modules in the order their forward was called (repeats kept)."""
    param_owners: dict[str, str]
    """Parameter or buffer qualified name to the qualified name of the module holding it."""
    param_values: dict[str, "np.ndarray"]
    value_reads: dict[int, tuple[str, int]] = field(default_factory=dict)
    """Records whose value the model read into Python (``.tolist()``, ``.item()``, ``int(x)``), each with the
    innermost module that read it first and how many records there were then (when it was read)."""
    model_outputs: list["np.ndarray | None"] = field(default_factory=list)
    """What the traced run returned, in order (``None`` for an output that is not a tensor NumPy can hold)."""
    _scales: dict[int, float] = field(default_factory=dict, repr=False)
    _summaries: dict[int, tuple] = field(default_factory=dict, repr=False)
    _unchanged: dict[int, bool] = field(default_factory=dict, repr=False)
    _passed_to: dict[int, int] = field(default_factory=dict, repr=False)
    _readers: dict[int, list[int]] | None = field(default=None, repr=False)

    def output_summary(self, index: int) -> tuple:
        """The :func:`~modelexport_core.format.value_index.summary` of record ``index``'s first output, computed once."""
        from modelexport_core.sdk import summary

        if index not in self._summaries:
            self._summaries[index] = summary(self.records[index].outputs[0])
        return self._summaries[index]

    def output_scale(self, index: int) -> float:
        """The :func:`~modelexport_core.format.value_index.scale` of record ``index``'s first output, computed once."""
        from modelexport_core.sdk import scale

        if index not in self._scales:
            self._scales[index] = scale(self.records[index].outputs[0])
        return self._scales[index]

    def returns_its_input(self, index: int) -> bool:
        """Whether record ``index`` returned its first recorded input exactly (``x + 0``, ``x * 1``): the same
        shape, element type and elements; computed once."""
        from modelexport_core.sdk import identical

        if index not in self._unchanged:
            record = self.records[index]
            source = self.records[record.inputs[0]] if record.inputs else None
            self._unchanged[index] = identical(record.outputs[0] if record.outputs else None,
                                               source.outputs[0] if source is not None and source.outputs else None)
        return self._unchanged[index]

    def unchanged_source(self, index: int) -> int:
        """The record whose output record ``index`` passes on unchanged, through dropped calls (dropout,
        ``contiguous``) and calls returning their one input exactly (``x + 0``); ``index`` itself where it
        computes something. Computed once per record."""
        if index not in self._passed_to:
            record = index
            while len(self.records[record].inputs) == 1 and (
                    self.records[record].dropped or self.returns_its_input(record)):
                record = self.records[record].inputs[0]
            self._passed_to[index] = record
        return self._passed_to[index]

    def readers(self) -> dict[int, list[int]]:
        """For each record, the records that read its output, in order; computed once."""
        if self._readers is None:
            self._readers = {}
            for record in self.records:
                for source in record.inputs:
                    self._readers.setdefault(source, []).append(record.index)
        return self._readers

    def handed_over(self, index: int) -> bool:
        """Whether every call reading record ``index``'s value (through calls exporters write no node for, as
        ``contiguous``) ran in another module than the one that made it: the value was handed over (a mask
        or position table a model computes once for its layers), so its own module did nothing more with it.
        ``False`` for a value nothing read."""
        readers = self.reading(index)
        return bool(readers) and all(self.records[r].stack != self.records[index].stack for r in readers)

    def reading(self, index: int, through_aliases: bool = False) -> list[int]:
        """The calls reading record ``index``'s value, through calls exporters write no node for (``contiguous``,
        dropout) and, with ``through_aliases``, calls returning their input itself (``.to`` the same dtype)."""
        readers = self.readers()
        found, seen, todo = [], {index}, [index]
        while todo:
            for reader in readers.get(todo.pop(), ()):
                if reader in seen:
                    continue
                seen.add(reader)
                record = self.records[reader]
                (todo if record.dropped or (through_aliases and record.alias) else found).append(reader)
        return found

    def ancestors(self, sized: bool = False) -> list[int]:
        """For each record, a bit set (an int) of every record it depends on through data flow.

        ``sized``: what is computed from a call reading no recorded tensor (a factory: ``ones``, ``arange``)
        may also depend on every shape read recorded before that call, whose sizes reached it as Python
        numbers the trace does not follow (``torch.ones(x.shape) * pad``); an exporter writes that dependence
        as nodes (``Shape``, ``ConstantOfShape``). The factory's own entry stays empty: which of several equal
        factories a node is, only time tells.
        """
        result: list[int] = []
        passed: list[int] = []  # what a record's readers depend on through it
        sizes = 0  # every shape read so far, with what it depends on
        for record in self.records:
            bits = 0
            for source in record.inputs:
                bits |= passed[source] | (1 << source)
            result.append(bits)
            factory = sized and not record.inputs and not record.op.startswith(INPUT_PREFIX)
            passed.append(bits | sizes if factory else bits)
            if sized and record.shape_read:
                sizes |= bits | (1 << record.index)
        return result

    def unread(self) -> set[int]:
        """The records whose value nothing used: no record reading it was used, the model did not read it into
        Python and it is none of the model's outputs. Exporters write no node for such a call (dead code, as a
        block's input projection its caller computes again). Shape reads count as used (their sizes go on in
        Python, unrecorded), as do calls writing into a tensor (what reads the tensor reads them)."""
        from modelexport_core.sdk import identical

        used = [False] * len(self.records)
        readers = self.readers()
        outputs = [o for o in self.model_outputs if o is not None]
        for record in reversed(self.records):
            used[record.index] = (
                record.shape_read or record.index in self.value_reads or _mutates_first_argument(record.op)
                or any(used[r] for r in readers.get(record.index, ()))
                or any(identical(out, o) for out in record.outputs[:1] for o in outputs)
            )
        return {record.index for record in self.records if not used[record.index]}

    def input_dependent(self) -> list[bool]:
        """For each record, whether its value depends on a model input through data flow."""
        result: list[bool] = []
        for record in self.records:
            result.append(record.op.startswith(INPUT_PREFIX) or any(result[s] for s in record.inputs))
        return result


def _op_name(func: Any) -> str:
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    return str(name)


def _mutates_first_argument(op: str) -> bool:
    """In-place calls (``add_``, ``__setitem__``) change their first argument, which may not be returned."""
    last = op.rpartition(".")[2]
    return last == "__setitem__" or (last.endswith("_") and not last.endswith("__"))


def _mutates(op: str, args: tuple, kwargs: dict) -> list[Any]:
    """The tensors a call may write into: an in-place call's first argument (``x += y``, ``inplace=True`` too), ``out=``."""
    last = op.rpartition(".")[2]
    written = []
    in_place = _mutates_first_argument(op) or (last.startswith("__i") and last.endswith("__"))
    if args and (in_place or kwargs.get("inplace") is True or (len(args) > 1 and args[-1] is True)):
        written.append(args[0])
    if kwargs.get("out") is not None:
        written.extend(tensors_in(kwargs["out"]))
    return written


class _Recorder:
    """State shared by the module hooks and the function mode during one traced run."""

    def __init__(self, param_ids: dict[int, str]):
        self.stack: list[str] = []
        self.records: list[OpRecord] = []
        self.execution_trace: list[str] = []
        self.param_ids = param_ids
        self.producer: dict[int, int] = {}
        self.alive: list[Any] = []  # keeps every seen tensor alive so that ids are never reused
        self.value_reads: dict[int, tuple[str, int]] = {}
        self.live: dict[int, list[tuple[OpRecord, int]]] = {}
        """Recorded outputs held as the model's own tensors, by storage: copied only before a call writes to them."""

    def _keep(self, record: OpRecord, tensor: "torch.Tensor") -> None:
        """Hold ``tensor`` as an output of ``record``, without a copy until something writes into its storage."""
        record.outputs.append(tensor.detach())
        try:
            storage = tensor.untyped_storage().data_ptr()
        except Exception:  # noqa: BLE001 - tensors without storage (sparse, nested): copy at once
            record.outputs[-1] = tensor.detach().clone()
            return
        self.live.setdefault(storage, []).append((record, len(record.outputs) - 1))

    def before_call(self, op: str, args: tuple, kwargs: dict) -> None:
        """Copy the recorded values a call is about to overwrite (and every view sharing their storage)."""
        for tensor in _mutates(op, args, kwargs):
            try:
                storage = tensor.untyped_storage().data_ptr()
            except Exception:  # noqa: BLE001
                continue
            for record, position in self.live.pop(storage, []):
                record.outputs[position] = record.outputs[position].clone()

    def add_input(self, name: str, tensor: "torch.Tensor") -> None:
        record = OpRecord(len(self.records), f"{INPUT_PREFIX}{name}", (), (), ())
        record.outputs.append(tensor.detach().clone())
        self.records.append(record)
        self.producer[id(tensor)] = record.index
        self.alive.append(tensor)

    def record_shape_read(self, op: str, args: tuple, result: Any, dim: int | None = None) -> None:
        """A read of a tensor's shape: where the shape arithmetic that follows was written."""
        import torch

        tensor = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if tensor is None or id(tensor) not in self.producer:
            return
        record = OpRecord(
            len(self.records), op, tuple(self.stack), (self.producer[id(tensor)],), (), shape_read=True, read_dim=dim
        )
        record.outputs.append(torch.tensor(list(result), dtype=torch.int64))
        self.records.append(record)

    def record_value_read(self, tensor: "torch.Tensor") -> None:
        """A read of a tensor's elements into Python, by the module running now (the first read counts); a
        value a call returned unchanged (``.cpu()``, ``.contiguous()``) is read where it came from too."""
        index = self.producer.get(id(tensor))
        read = (self.stack[-1] if self.stack else "", len(self.records))
        while index is not None:
            self.value_reads.setdefault(index, read)
            record = self.records[index]
            index = record.inputs[0] if (record.alias or record.dropped) and len(record.inputs) == 1 else None

    def record(self, op: str, args: tuple, kwargs: dict, result: Any) -> None:
        import torch

        if isinstance(result, torch.Size):
            self.record_shape_read(op, args, result)
            return
        if isinstance(result, int) and op.rpartition(".")[2] == "size" and args and isinstance(args[0], torch.Tensor):
            # ``x.size(d)`` returns one extent, but the exporter writes it as a read of the whole shape
            # (Shape, then Gather): it is a shape read as much as ``x.shape[d]``
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            self.record_shape_read(op, args, args[0].shape, dim if isinstance(dim, int) else None)
            return
        if op.rpartition(".")[2] in VALUE_READS and args and isinstance(args[0], torch.Tensor):
            self.record_value_read(args[0])
            return
        outputs = list(tensors_in(result))
        if not outputs and _mutates_first_argument(op) and args and hasattr(args[0], "detach"):
            outputs = [args[0]]
        if not outputs:
            return
        sources: list[int] = []
        params: list[str] = []
        for tensor in tensors_in((args, kwargs)):
            key = id(tensor)
            if key in self.param_ids:
                if self.param_ids[key] not in params:
                    params.append(self.param_ids[key])
            elif key in self.producer and self.producer[key] not in sources:
                sources.append(self.producer[key])
            self.alive.append(tensor)
        record = OpRecord(len(self.records), op, tuple(self.stack), tuple(sources), tuple(params))
        if not _mutates_first_argument(op):
            argument_ids = {id(t) for t in tensors_in((args, kwargs))}
            record.alias = any(id(t) in argument_ids for t in outputs)
        for tensor in outputs:
            try:
                self._keep(record, tensor)
            except Exception:  # noqa: BLE001 - tensors that cannot be held are simply not compared
                continue
            self.producer[id(tensor)] = record.index
            self.alive.append(tensor)
        self.records.append(record)


def _make_mode(recorder: _Recorder):
    from torch.overrides import TorchFunctionMode

    class RecordingMode(TorchFunctionMode):
        """Records every torch call made while active; nested calls inside one call are not seen."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            op = _op_name(func)
            recorder.before_call(op, args, kwargs)
            result = func(*args, **kwargs)
            recorder.record(op, args, kwargs, result)
            return result

    return RecordingMode()


def _numpy(tensor: "torch.Tensor") -> "np.ndarray":
    import torch

    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16 or tensor.dtype == torch.float16:
        tensor = tensor.float()
    return tensor.resolve_conj().resolve_neg().numpy()


def _numpy_or_none(tensor: "torch.Tensor") -> "np.ndarray | None":
    try:
        return _numpy(tensor)
    except Exception:  # noqa: BLE001 - sparse, quantized or meta tensors are not compared
        return None


def trace_execution(ctx: "ExportContext", exporter: str | None = None) -> Trace:
    """Run ``ctx.module`` on ``ctx.args`` once, recording every torch call and module call.

    With ``exporter``, the model runs as that exporter ran it (``as_exported``); where it
    fails so (eager code that only an exporter can run), it runs as it is.
    """
    if exporter is not None:
        try:
            return _trace_execution(ctx, exporter)
        except Exception:  # noqa: BLE001 - the exporter's path does not run eagerly: the plain one is traced
            pass
    return _trace_execution(ctx, None)


def model_weights(model: "torch.nn.Module") -> Trace:
    """A trace of no calls holding the model's parameters and buffers (what weights are matched against)."""
    _, param_owners, param_values = _parameters_of(model)
    return Trace([], [], param_owners, param_values)


def _parameters_of(model: "torch.nn.Module") -> tuple[dict[int, str], dict[str, str], dict[str, Any]]:
    """Each parameter and buffer: its qualified name by tensor id, its module by name, its value by name."""
    param_ids: dict[int, str] = {}
    param_owners: dict[str, str] = {}
    param_values: dict[str, Any] = {}
    for qualname, module in model.named_modules():
        for local, tensor in list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False)):
            if tensor is None or id(tensor) in param_ids:
                continue  # a tied parameter belongs to the first module that holds it
            full = f"{qualname}.{local}" if qualname else local
            param_ids[id(tensor)] = full
            param_owners[full] = qualname
            value = _numpy_or_none(tensor)
            if value is not None:
                param_values[full] = value
    return param_ids, param_owners, param_values


def _trace_execution(ctx: "ExportContext", exporter: str | None) -> Trace:
    import torch

    model = ctx.model
    param_ids, param_owners, param_values = _parameters_of(model)

    recorder = _Recorder(param_ids)
    handles = []

    def make_hooks(qualname: str):
        def pre_hook(module, args):
            recorder.stack.append(qualname)
            recorder.execution_trace.append(qualname)

        def post_hook(module, args, output):
            if recorder.stack and recorder.stack[-1] == qualname:
                recorder.stack.pop()
            elif qualname in recorder.stack:  # an exception unwound inner modules without their hooks
                del recorder.stack[len(recorder.stack) - 1 - recorder.stack[::-1].index(qualname):]

        return pre_hook, post_hook

    try:
        for qualname, module in model.named_modules():
            pre_hook, post_hook = make_hooks(qualname)
            handles.append(module.register_forward_pre_hook(pre_hook))
            handles.append(module.register_forward_hook(post_hook, always_call=True))
        for name, tensor in zip(ctx.input_names, ctx.args):
            recorder.add_input(name, tensor)
        with torch.no_grad(), as_exported(exporter), _make_mode(recorder):
            returned = ctx.module(*ctx.args)
    finally:
        for handle in handles:
            handle.remove()

    for record in recorder.records:
        record.outputs = [array for array in map(_numpy_or_none, record.outputs) if array is not None]
    returned = returned if isinstance(returned, (tuple, list)) else (returned,)
    outputs = [_numpy_or_none(tensor) if isinstance(tensor, torch.Tensor) else None for tensor in returned]
    return Trace(recorder.records, recorder.execution_trace, param_owners, param_values, recorder.value_reads, outputs)
