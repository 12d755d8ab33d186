"""An ONNX file's graph without its weights: read it, and write its nodes back with the weights untouched.

Tags change node metadata only, yet ``onnx.load`` parses every weight and ``onnx.save``
serializes them again; on a 440 MB model that is most of the cost of tagging, and twice
the model's size in memory. Here the file is read at the protobuf wire level: the graph's
nodes, inputs, outputs and the other small fields are parsed, each initializer becomes a
stub (name, type and shape, its data left in the file), and writing back splices the new
nodes between the untouched bytes of everything else, copied file to file by the kernel.
Files with external data (over 2 GB) work the same way: their initializers are stubs already.
"""

from __future__ import annotations

import dataclasses
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator, NamedTuple

if TYPE_CHECKING:
    import numpy as np
    import onnx

_MODEL_GRAPH = 7
_GRAPH_NODE = 1
_GRAPH_INITIALIZER = 5
_TENSOR_DATA_FIELDS = frozenset({4, 5, 6, 7, 9, 10, 11})  # float, int32, string, int64, raw, double, uint64
_TENSOR_RAW_DATA = 9
_INLINE_LIMIT = 1024  # bytes of data a stub keeps inline, as onnx.save keeps small tensors out of external data
_RAW_LAYOUT_FIELDS = frozenset({4, 9, 10})  # raw_data, and packed fixed-width float/double: the raw bytes
_TENSOR_EXTERNAL_DATA = 13
_TENSOR_DATA_LOCATION = 14
_LENGTH_DELIMITED = 2
_DATA_FIELD_NAMES = ("float_data", "int32_data", "string_data", "int64_data", "raw_data", "double_data", "uint64_data")
_WINDOW = 1 << 16

class _Field(NamedTuple):
    """One protobuf field of a message in the file: its number, and where its tag and value lie."""

    number: int
    start: int  # offset of the field's tag
    value_start: int  # offset of its value (after the length prefix for length-delimited fields)
    end: int


class _Reader:
    """Random reads of small spans of a file through a window, so skipping large fields costs nothing."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.base = 0
        self.buffer = b""

    def read(self, offset: int, size: int) -> bytes:
        start = offset - self.base
        if start < 0 or start + size > len(self.buffer):
            self._load(offset, size)
            start = 0
        return self.buffer[start:start + size]

    def _load(self, offset: int, size: int) -> None:
        self.stream.seek(offset)
        self.buffer = self.stream.read(max(size, _WINDOW))
        self.base = offset


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _fields(reader: _Reader, start: int, end: int) -> Iterator[_Field]:
    """The fields of the message stored in ``[start, end)`` of the file, in file order."""
    position = start
    while position < end:
        relative = position - reader.base
        if relative < 0 or relative + 20 > len(reader.buffer):
            reader._load(position, min(20, end - position))
            relative = 0
        header = reader.buffer
        key, after = _varint(header, relative)
        number, wire = key >> 3, key & 7
        if wire == _LENGTH_DELIMITED:
            length, after = _varint(header, after)
            value_start = position + after - relative
            field_end = value_start + length
        elif wire == 0:
            _, after = _varint(header, after)
            value_start = field_end = position + after - relative
        elif wire == 1:
            value_start = position + after - relative
            field_end = value_start + 8
        elif wire == 5:
            value_start = position + after - relative
            field_end = value_start + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at offset {position}")
        if field_end > end:
            raise ValueError(f"truncated protobuf field at offset {position}")
        yield _Field(number, position, value_start, field_end)
        position = field_end


def _graph_field(reader: _Reader, size: int) -> _Field:
    graphs = [f for f in _fields(reader, 0, size) if f.number == _MODEL_GRAPH]
    if len(graphs) != 1:
        raise ValueError("not an ONNX model with one graph")
    return graphs[0]


def _split_tensor(reader: _Reader, tensor: _Field) -> tuple[list[bytes], _Field | None, bool]:
    """An initializer's fields as stored, but its data where that is large raw bytes: (the other fields, that data
    field or None, whether the tensor already refers to external data).

    Small data stays with the rest (runtimes read shapes and axes from it during shape inference), and so
    does varint-packed or split data, which is not the tensor's raw bytes (such data is small).
    """
    parts = []
    external = False
    data_fields: list[_Field] = []
    for field in _fields(reader, tensor.value_start, tensor.end):
        if field.number in _TENSOR_DATA_FIELDS:
            data_fields.append(field)
            continue
        external |= field.number == _TENSOR_DATA_LOCATION
        parts.append(reader.read(field.start, field.end - field.start))
    if (
        len(data_fields) > 1
        or any(f.number not in _RAW_LAYOUT_FIELDS for f in data_fields)
        or sum(f.end - f.value_start for f in data_fields) <= _INLINE_LIMIT
    ):
        parts.extend(reader.read(f.start, f.end - f.start) for f in data_fields)
        return parts, None, external
    return parts, (data_fields[0] if data_fields else None), external


def _initializer(body: bytes) -> bytes:
    return _encode_varint(_GRAPH_INITIALIZER << 3 | _LENGTH_DELIMITED) + _encode_varint(len(body)) + body


def _stub_tensor(reader: _Reader, tensor: _Field, file_name: str) -> bytes:
    """An initializer without its data: every other field kept, its inline data referred to as external data.

    The reference (``location`` the file itself, ``offset``, ``length``) is exact for the
    file as read, so the stub model saved beside it is a complete model.
    """
    parts, data, external = _split_tensor(reader, tensor)
    if data is None:
        return _initializer(b"".join(parts))
    if not external:
        import onnx

        entry = onnx.StringStringEntryProto(key="location", value=file_name)
        parts.append(_encode_varint(_TENSOR_EXTERNAL_DATA << 3 | _LENGTH_DELIMITED)
                     + _encode_varint(entry.ByteSize()) + entry.SerializeToString())
        for key, value in (("offset", data.value_start), ("length", data.end - data.value_start)):
            entry = onnx.StringStringEntryProto(key=key, value=str(value))
            parts.append(_encode_varint(_TENSOR_EXTERNAL_DATA << 3 | _LENGTH_DELIMITED)
                         + _encode_varint(entry.ByteSize()) + entry.SerializeToString())
        parts.append(_encode_varint(_TENSOR_DATA_LOCATION << 3) + _encode_varint(onnx.TensorProto.EXTERNAL))
    return _initializer(b"".join(parts))


_scanned: dict[tuple, list[_Field]] = {}
"""The initializer fields of the file last read by load_graph, so save_graph need not walk it again."""


def _file_key(path: Path) -> tuple:
    status = os.stat(path)
    return (os.path.realpath(path), status.st_size, status.st_mtime_ns, status.st_ino)


def _remember_initializers(path: Path, fields: list[_Field]) -> None:
    _scanned.clear()
    _scanned[_file_key(path)] = fields


def _read_span(stream: BinaryIO, start: int, end: int) -> bytes:
    if end <= start:
        return b""
    stream.seek(start)
    return stream.read(end - start)


def load_graph(path: Path) -> "onnx.ModelProto":
    """The model in ``path`` with every initializer a stub: its nodes, inputs, outputs and metadata, no weights.

    Nodes are read as they are (a ``Constant`` node keeps its value). Use it to read or
    tag the graph; :func:`save_graph` writes it back beside the original weights,
    :func:`check_graph` runs the ONNX checker on it.
    """
    import onnx

    size = os.path.getsize(path)
    with open(path, "rb") as stream:
        reader = _Reader(stream)
        graph = _graph_field(reader, size)
        graph_parts = []
        initializers = []
        run_start = graph.value_start  # fields other than initializers are read in runs, not one by one
        for field in _fields(reader, graph.value_start, graph.end):
            if field.number == _GRAPH_INITIALIZER:
                graph_parts.append(_read_span(stream, run_start, field.start))
                graph_parts.append(_stub_tensor(reader, field, Path(path).name))
                initializers.append(field)
                run_start = field.end
        graph_parts.append(_read_span(stream, run_start, graph.end))
        _remember_initializers(path, initializers)
        graph_bytes = b"".join(graph_parts)
        head = reader.read(0, graph.start) if graph.start else b""
        stream.seek(graph.end)
        tail = stream.read()
    model = onnx.ModelProto()
    model.ParseFromString(
        head + _encode_varint(_MODEL_GRAPH << 3 | _LENGTH_DELIMITED) + _encode_varint(len(graph_bytes)) + graph_bytes + tail
    )
    return model


def _write_all(target: BinaryIO, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[target.write(view):]


def _copy_range(source: BinaryIO, target: BinaryIO, start: int, end: int) -> None:
    """Copy ``[start, end)`` of ``source`` to the end of ``target`` (unbuffered) in the kernel when it can."""
    remaining = end - start
    offset = start
    while remaining:
        try:
            copied = os.copy_file_range(source.fileno(), target.fileno(), remaining, offset)
        except (AttributeError, OSError):
            copied = 0
        if not copied:  # no copy_file_range here: through a small buffer
            source.seek(offset)
            chunk = source.read(min(remaining, 1 << 20))
            _write_all(target, chunk)
            copied = len(chunk)
        offset += copied
        remaining -= copied


def _inline_data(reader: _Reader, tensor: _Field) -> _Field | None:
    """The data field of an initializer stored inline, if it has one."""
    data = None
    for field in _fields(reader, tensor.value_start, tensor.end):
        if field.number in _TENSOR_DATA_FIELDS:
            data = field
    return data


def save_graph(model: "onnx.ModelProto", source: Path, target: Path) -> None:
    """Write ``model`` (``source`` read with :func:`load_graph`, then edited) to ``target`` with the weights of ``source``.

    Everything but the weights' bytes comes from ``model``: nodes, names (initializers'
    too), inputs, outputs, metadata. Initializers must be the same ones in the same order;
    each stub that stood for inline data gets that data back, copied file to file.
    """
    import onnx

    size = os.path.getsize(source)
    with open(source, "rb") as stream:
        reader = _Reader(stream)
        graph = _graph_field(reader, size)
        sources = _scanned.get(_file_key(source))
        if sources is None:
            sources = [f for f in _fields(reader, graph.value_start, graph.end) if f.number == _GRAPH_INITIALIZER]
        stubs = model.graph.initializer
        if len(sources) != len(stubs):
            raise ValueError(f"{source} has {len(sources)} initializers, the edited graph {len(stubs)}")
        shell = onnx.ModelProto()
        shell.CopyFrom(model)
        shell.graph.ClearField("initializer")
        pieces: list[bytes | tuple[int, int]] = []
        for stub, field in zip(stubs, sources):
            data = _inline_data(reader, field)
            if data is None:  # external data (or an empty tensor): the stub is the tensor
                body = stub.SerializeToString()
                pieces.append(_encode_varint(_GRAPH_INITIALIZER << 3 | _LENGTH_DELIMITED)
                              + _encode_varint(len(body)) + body)
                continue
            header = onnx.TensorProto()
            header.CopyFrom(stub)
            for name in ("external_data", "data_location", *_DATA_FIELD_NAMES):
                header.ClearField(name)
            head = header.SerializeToString()
            length = len(head) + data.end - data.start
            pieces.append(_encode_varint(_GRAPH_INITIALIZER << 3 | _LENGTH_DELIMITED) + _encode_varint(length) + head)
            pieces.append((data.start, data.end))
        _write_model(shell, pieces, stream, target)


def _write_model(shell: "onnx.ModelProto", pieces: list, source: BinaryIO | None, target: Path) -> None:
    """Write ``shell`` (a model without initializers) with ``pieces`` appended to its graph.

    A piece is bytes, a ``(start, end)`` span of ``source`` copied by the kernel, or a
    :class:`StreamedTensor`'s data written by the tensor itself.
    """
    import io

    data = shell.SerializeToString()
    graph = _graph_field(_Reader(io.BytesIO(data)), len(data))

    def length(piece: Any) -> int:  # bytes, a (start, end) range of the source, or a weight with nbytes
        if isinstance(piece, bytes):
            return len(piece)
        if isinstance(piece, tuple):
            return piece[1] - piece[0]
        return int(piece.nbytes)

    graph_size = graph.end - graph.value_start + sum(length(piece) for piece in pieces)
    with open(target, "wb", buffering=0) as out:
        pending = bytearray(data[:graph.start])
        pending += _encode_varint(_MODEL_GRAPH << 3 | _LENGTH_DELIMITED) + _encode_varint(graph_size)
        pending += data[graph.value_start:graph.end]
        for piece in pieces:
            if isinstance(piece, bytes):
                pending += piece
                continue
            _write_all(out, pending)
            pending.clear()
            if isinstance(piece, tuple):
                assert source is not None, "a byte range of the source file without the source file"
                _copy_range(source, out, piece[0], piece[1])
                continue
            written = piece.write_data(out)
            if written is not None and written != piece.nbytes:
                raise ValueError(f"tensor {piece.header.name!r} wrote {written} bytes, not {piece.nbytes}")
        pending += data[graph.end:]
        _write_all(out, pending)


def check_graph(model: "onnx.ModelProto", source: Path) -> None:
    """The ONNX checker on ``model`` (read from ``source`` with :func:`load_graph`), without reading weights.

    The stub model is written beside ``source`` for the checker, whose external-data checks
    then find the weights where they are, and removed again.
    """
    import onnx

    with stub_file(model, source, "graph-check") as stub:
        onnx.checker.check_model(str(stub))


@dataclass(frozen=True)
class StreamedTensor:
    """An initializer to write inline without building its TensorProto: its header and how to write its data."""

    header: "onnx.TensorProto"  # name, type, shape; no data (or the whole tensor, when ``write_data`` is None)
    nbytes: int
    write_data: Callable[[BinaryIO], object] | None  # writes exactly ``nbytes`` raw (little-endian) bytes


def save_with_initializers(model: "onnx.ModelProto", tensors: list[StreamedTensor], target: Path) -> None:
    """Write ``model`` (no initializers of its own) with ``tensors`` as inline initializers, one at a time.

    ``onnx.save`` of a model with weights holds them twice more (TensorProtos, then the
    serialized string); this writes each tensor's bytes straight from where they are.
    """
    raw_key = _encode_varint(_TENSOR_RAW_DATA << 3 | _LENGTH_DELIMITED)
    initializer_key = _encode_varint(_GRAPH_INITIALIZER << 3 | _LENGTH_DELIMITED)
    pieces: list = []
    for tensor in tensors:
        if tensor.write_data is None:  # small, or not raw bytes: the header holds the tensor whole
            pieces.append(_initializer(tensor.header.SerializeToString()))
            continue
        header = tensor.header.SerializeToString() + raw_key + _encode_varint(tensor.nbytes)
        pieces.append(initializer_key + _encode_varint(len(header) + tensor.nbytes) + header)
        pieces.append(tensor)
    _write_model(model, pieces, None, target)


@dataclass
class StreamedModel:
    """An ONNX model not yet written: its graph in memory, each initializer's bytes still where they lie.

    ``model.graph.initializer`` holds every initializer's name, type and shape without its data, so
    the graph can be read, renamed and tagged before the file exists; ``data`` gives each one's size
    and how to write its bytes, in the same order. Writing once after tagging spares writing the
    weights and then copying them into a tagged file.
    """

    model: "onnx.ModelProto"
    data: list[tuple[int, Callable[[BinaryIO], object] | None]]
    """Per initializer, its size and how to write its bytes; ``(0, None)`` where the header holds its data."""
    raw: list[memoryview | None] | None = None
    """Per initializer, its raw bytes where they lie in memory (a model made from serialized bytes)."""
    _positions: dict[str, int] = dataclasses.field(default_factory=dict, repr=False)

    def value(self, tensor: "onnx.TensorProto") -> "np.ndarray":
        """The value of one of ``model.graph.initializer`` as an array: a read-only view where its bytes lie in
        memory (:attr:`raw`), else a copy."""
        import io

        from onnx import numpy_helper

        position = self._positions.get(tensor.name)
        if position is None or self.model.graph.initializer[position].name != tensor.name:  # renamed since
            self._positions = {header.name: i for i, header in enumerate(self.model.graph.initializer)}
            position = self._positions[tensor.name]
        _, write = self.data[position]
        if write is None:
            return numpy_helper.to_array(tensor)
        shared = _shared_array(tensor, self.raw[position]) if self.raw is not None else None
        if shared is not None:
            return shared
        buffer = io.BytesIO()
        write(buffer)
        return _with_raw_data(tensor, buffer.getvalue())

    def write(self, target: Path) -> None:
        """Write the file (initializers as ``model`` names them now), then let go of the weights."""
        import onnx

        headers = self.model.graph.initializer
        if len(headers) != len(self.data):
            raise ValueError(f"the graph has {len(headers)} initializers, the weights {len(self.data)}")
        tensors = [StreamedTensor(header, nbytes, write) for header, (nbytes, write) in zip(headers, self.data)]
        shell = onnx.ModelProto()
        shell.CopyFrom(self.model)
        shell.graph.ClearField("initializer")
        save_with_initializers(shell, tensors, target)
        self.data = []


def _shared_array(tensor: "onnx.TensorProto", raw: memoryview | None) -> "np.ndarray | None":
    """A read-only array over ``raw`` (no copy) of the tensor's type and shape, where NumPy has its type."""
    import sys

    import numpy as np
    from onnx.helper import tensor_dtype_to_np_dtype

    if raw is None or sys.byteorder != "little":
        return None
    try:
        dtype = np.dtype(tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, TypeError, ValueError):
        return None
    count = 1
    for extent in tensor.dims:
        count *= extent
    if dtype.kind not in "biufc" or dtype.itemsize * count != len(raw):
        return None
    return np.frombuffer(raw, dtype=dtype).reshape(tuple(tensor.dims))


def _span_writer(span: memoryview) -> tuple[int, Callable[[BinaryIO], object]]:
    def write(out: BinaryIO) -> None:
        _write_all(out, span)

    return len(span), write


def streamed_from_bytes(data: bytes) -> StreamedModel:
    """A serialized model (as an exporter hands it over) as a :class:`StreamedModel`: the graph parsed, each
    large initializer's bytes left where they lie in ``data`` and written from there, never copied in memory."""
    import io

    import onnx

    view = memoryview(data)
    reader = _Reader(io.BytesIO(data))  # a BytesIO over bytes shares them until written to
    graph = _graph_field(reader, len(data))
    graph_parts: list[bytes] = []
    writes: list[tuple[int, Callable[[BinaryIO], object] | None]] = []
    raw_spans: list[memoryview | None] = []
    run_start = graph.value_start
    for field in _fields(reader, graph.value_start, graph.end):
        if field.number != _GRAPH_INITIALIZER:
            continue
        graph_parts.append(bytes(view[run_start:field.start]))
        parts, raw, _ = _split_tensor(reader, field)
        graph_parts.append(_initializer(b"".join(parts)))
        if raw is None:
            writes.append((0, None))
            raw_spans.append(None)
        else:
            raw_spans.append(view[raw.value_start:raw.end] if raw.number == _TENSOR_RAW_DATA else None)
            writes.append(_span_writer(view[raw.value_start:raw.end]))
        run_start = field.end
    graph_parts.append(bytes(view[run_start:graph.end]))
    graph_bytes = b"".join(graph_parts)
    model = onnx.ModelProto()
    model.ParseFromString(bytes(view[:graph.start]) + _encode_varint(_MODEL_GRAPH << 3 | _LENGTH_DELIMITED)
                          + _encode_varint(len(graph_bytes)) + graph_bytes + bytes(view[graph.end:]))
    return StreamedModel(model, writes, raw_spans)


def tensor_value(tensor: "onnx.TensorProto", base_dir: Path) -> "np.ndarray":
    """The value of an initializer of a graph read by :func:`load_graph` (or of any tensor), as an array.

    A stub's data is read from where it lies (``base_dir`` is the folder of the file read);
    the stub itself is left as it is, so reading every weight one at a time never holds
    more than one of them.
    """
    import onnx
    from onnx import numpy_helper

    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return numpy_helper.to_array(tensor)
    info = {entry.key: entry.value for entry in tensor.external_data}
    with open(Path(base_dir) / info["location"], "rb") as stream:
        stream.seek(int(info.get("offset", 0)))
        if "length" in info:
            data = bytearray(int(info["length"]))  # read straight into a buffer the array keeps (writable)
            data = data[:stream.readinto(data)]
        else:
            data = bytearray(stream.read())
    return _with_raw_data(tensor, data)


_PLAIN_DTYPES = {1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 7: "<i8", 9: "?", 10: "<f2", 11: "<f8",
                 12: "<u4", 13: "<u8", 14: "<c8", 15: "<c16"}
"""ONNX element types whose raw data numpy reads as it lies (little-endian, one element per item)."""


def _with_raw_data(tensor: "onnx.TensorProto", data: "bytes | bytearray") -> "np.ndarray":
    """The value of ``tensor`` (a header without its data, or one referring to external data) given its raw bytes."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    plain = _PLAIN_DTYPES.get(tensor.data_type)
    count = int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1
    if plain is not None and len(data) == count * np.dtype(plain).itemsize:
        # the common case: the array is the buffer read (numpy_helper copies the bytes twice), writable as it
        # always was (an immutable ``bytes`` is copied once)
        array = np.frombuffer(data, dtype=plain).reshape(tuple(tensor.dims))
        array = array.astype(array.dtype.newbyteorder("="), copy=False)  # a no-op on little-endian machines
        return array if array.flags.writeable else array.copy()
    inline = onnx.TensorProto()
    inline.CopyFrom(tensor)
    inline.ClearField("external_data")
    inline.data_location = onnx.TensorProto.DEFAULT
    inline.raw_data = bytes(data)
    return numpy_helper.to_array(inline)


@contextmanager
def stub_file(model: "onnx.ModelProto", source: Path, purpose: str) -> Iterator[Path]:
    """``model`` (read from ``source`` with :func:`load_graph`, maybe edited) saved beside ``source`` while in use.

    Its stubs refer to the weights where they lie, so a runtime given this path loads a
    complete model without the weights ever passing through Python.
    """
    source = Path(source)
    path = source.with_name(f".{source.name}.{purpose}")
    try:
        path.write_bytes(model.SerializeToString())  # onnx.save would walk every tensor for external data
        yield path
    finally:
        path.unlink(missing_ok=True)
