"""Call boundaries: the values each module call took and returned, found in the file, bound where its nodes lie.

A call of a module begins after the values it takes exist, computes its results from them, its own
parameters and constants, and hands the results back. So, with the model run the way the exporter ran it
(forward hooks copy each call's tensor inputs as it begins and its tensor outputs as it ends) and the file
run in onnxruntime on the same inputs, each of those values is a node output of the file, found by value:

- a call's *region* is the nodes its outputs were computed from, less the nodes its inputs were computed
  from, written after the last call result known when it began (exporters write nodes in the order they
  ran); constant nodes (computed from no graph input) are left to the other passes;
- a node inside the region of a call ran inside that call, so its module holds the node's tag
  (:func:`hold_boundaries` moves a tag outside it in); a node outside every region of a module whose every
  call was bounded did not run in that module (a tag inside it moves out to its parent);
- a node inside regions of calls on two lines of the module tree ran in the call whose region lies within
  the others' (one module instance registered under two parents and called by the second: PyTorch names it,
  and each of its calls, by its first name); where no region lies within the others (a value the exporter
  shared between two calls), its tag stays;
- a call began once the values it took existed: the nodes they were computed from (back to where its caller
  began) ran before it, and a tag inside a module none of whose calls ran them moves out, bounded or not (a
  call returning zeros, a branch whose last norm scales by zero, is bounded by nothing else); constant nodes
  among them too (positions a caller builds from sizes known at export, handed to a call), and what computed a
  value it took from the model's inputs alone, however early (a mask the root builds from the input's sizes
  before the caller began), and the one node holding an input of one number repeated that bounded the call
  (zeros the caller built for token types nobody gave). A tensor a call took that equals one the model was given
  but is another tensor (a mask cut to the sequence's length) was made before the call began, by the one node
  holding it where one alone does, and so was what that node was computed from. A value a call took, met for the
  first time, is held
  by the first node equal to it that is not inside a call that ended (other than that call's results): a
  tensor made inside an earlier call and not returned is no later call's input, so an equal value was computed
  again for it (a reshape the caller wrote of what an earlier child reshaped for itself). The same holds where
  the call is bounded: of the nodes equal to an input, those inside a call that ended are not where it came
  from. A tensor an earlier call returned (not one it took) was made after that call began: where that call ran
  nodes (the calls it made hold nodes of the file), a node written before it began does not hold it, however equal
  (a layer at its initial weights returns what it took changed by less than two runtimes' rounding, and the node
  holding what it took is equal to what it returned); where such a node is equal to it, which node holds it is not
  told, so the call taking it is not bounded by it. A tensor a call took that no call took or returned before was
  made after the last call event, before the call began: where it is an earlier tensor's value run on unchanged (a
  concatenation of one tensor), the first node passing it on ran before the call; where one node alone holds it and
  the last call event was the end of a call (of a module called once), that node ran after that call
  (:attr:`Boundaries.ran_after`: a transpose of a result the values could not place, as a norm at its initial
  statistics returns what it took);
  where several nodes passing one value on hold it and the first holds that call's result, the tensor is another
  made from the result or after it, so the last of them ran after that call (a scale by one the caller wrote).
  A call hands on nothing but its results: a node every reader of which ran after that call ended, holding a value
  of no shape and type the call returned, ran after it too (an index its caller reshaped for a gather of what a
  router returned, where the results are not found by value: a vector sorted among equal keys, which two runtimes
  order apart); integers of at most one axis excepted, as a call may return numbers that are not tensors.
  Of the nodes running on unchanged a tensor a call took alone (its one tensor), one that also reads floats
  computed from the model's inputs and not from that value ran before the call, and so did those before it: a
  call computes from what it took, its own weights and constants (a mask of ones its caller multiplied in).
  For the same reason a call given no numbers reads no size of a tensor it took no value of: of the nodes running
  on unchanged a tensor it took, one that also reads sizes of such a tensor ran before it, and so did those
  before it (windows its caller cut from a padded input by the sizes of that input before the padding); and
  where every value a call took is a number or held by a node (none the model's input), a node measuring a
  tensor the call took no value of, with what only such reads lead from to its results, ran before it (sizes
  its caller measured and handed over as tensors of one integer). And where a call took no number and no model
  input, of the nodes running on unchanged a tensor it took, one that also reads a tensor of several elements
  computed from none of what it took (not from constants and weights alone, nor a list of integers) ran before
  it, and so did those before it, whatever else it took (a mask its caller anded with a second mask of its own);
- a module called once ran nothing written from the first result of a call that began after its call ended
  (:attr:`Boundaries.ended_before`): exporters write nodes in the order they ran, so that result and every node
  after it ran after the module's call (a router returning indices no node holds bounds nothing, yet the
  attention its caller computes after the next call is not the router's); and, the other way round, a module
  called once ran nothing written at or before the last result of a call that ended before its call began,
  bounded or not (:attr:`Boundaries.began_after`): integer arithmetic computed from the model's inputs goes into no
  call that began after it (a size its caller read before the call the caller made first, handed to a second call
  as plain numbers, is the caller's, not the second call's);
- a call that took the very tensor an earlier call returned: the nodes passing it on toward the later call's
  results ran after the first call returned it and before the second's results, so in one of the two calls or in
  a caller between them (:attr:`Boundaries.between`); a tag off every such line goes to the two calls' common
  ancestor (a pooling of a single position, equal to the block's result it reads, left in that block); so does
  a copy of the value reading nothing else (a cast to the type it has, a view) that a strategy put in the first
  call where the two are elements of one list of layers: nothing says the first layer rather than the next one
  ran it (a cast at the start of the next layer's norm), and a tag in a sibling layer is the defect tags exist
  to end (:attr:`Boundaries.carried`);
- a node passing on, after the node that made it, a tensor a call returned as a call it made had returned it
  (written after that inner call's region) ran in the inner call or after the outer one ended, never in a call on
  the line between them: the outer calls ran nothing after the inner one returned it (a layer scaling what its
  attention returned, its output projection's tensor) (:attr:`Boundaries.returned_through`);
- of the nodes passing a call's result on after the node that made it, those shaped by sizes of a value the
  call made (not from its results alone: a gather index it computed), up to the last such one, with the integer
  arithmetic serving them alone, ran in the call (:attr:`Boundaries.shaped_within`): what a call made and did
  not return no later code reads (a text model reshaping the rows it picked by its end tokens). Not where the
  call lies in an element of a list of layers: the next element may have computed the size again, merged by the
  exporter into the first one's node, and a tag in a sibling layer is the defect tags exist to end;
- a value a call took, cast to the type it has by a node that only the call's nodes read, was cast in the call:
  code casts a value where it computes with it (a norm computing in float32). Where an earlier call returned
  that tensor it may have cast it as it returned it; the graph and the values are the same either way, and
  this is the choice made between the two. Reads written after the call's results do not count against it: a
  cast to the type it has returns the very tensor it was given, so a trace records every later read of that
  tensor (a residual the caller adds) as a read of the cast. Where only calls the taking call made compute with
  the cast (it reads its sizes at most), or where the call that computed the tensor cast what it took to the type
  it has (computing in a type of its choosing), that call cast it as it returned it (:attr:`Boundaries.cast_back`:
  a norm casting back to the type it was given), where it made the tensor: not one a call it made returned to it
  (a layer handing on its attention's weights);
- a node the values leave between two calls (above), passing a call's result on after the node that made it,
  or passing on what a call took where it returned a new tensor equal to it (:attr:`Boundaries.handed_on`: that
  call's or its caller's), that reads a weight equal to a parameter or buffer of one of the modules it may have
  run in and of no other, ran in that module's call: a module reads its own tensors (a layer scale of ones, a
  norm's weight of ones, a shift made from a norm's statistics), however many equal ones the exporter merged
  with them. What made the value it read from those tensors goes with it; a value some call took or returned
  is read as that call's value, not as the weights it was made from (:func:`weight_owners`);
- a constant made for its readers (computed from no weight) written between two nodes of a call's region (or
  after the last node holding a value the call took and before the region's first node), read only within that
  call, and not taken by it, ran in that call (or one within it): a tag outside it moves in (a caller would have
  handed over a constant it made for the call's nodes alone);
- a constant computed from weights (a function of a parameter: a gate's sigmoid of its own parameter, whose
  owner equal parameters elsewhere leave open) whose readers all lie within a module called below the one it
  is tagged with goes into that module, unless a call of it took the value (:attr:`Boundaries.ran_before`);
- integer arithmetic turning numbers into the operand of one node alone (a list of sizes made a tensor: each
  number unsqueezed, then joined), reading no value's sizes itself, goes where that node goes: the exporter
  writes it where the operand is used (:attr:`Boundaries.built_for`); but not a node that may hold a value a call
  took (positions handed to an embedding), made before that call began;
- a crop taking the whole of a value that nothing else reads ran where that value was made
  (:attr:`Boundaries.crops`): the values cannot say whether the code making the value cropped it or the code
  taking it did, but code crops what it padded or joined itself (a stage trimming its padding, a block keeping
  its first channels of a stack that has no more), and a value read by nothing but a crop of all of it was
  never handed on whole. Where a call took a value and cropped all of it itself, the crop is misplaced;
- sizes computed from a number handed to a call (written after the node handing it), read only within the call,
  ran in it: a caller computing them would have handed them over instead; so did integers a call computed from
  the elements (not the sizes) of a model input it took itself, read only within it (positions counted from
  token ids).

:func:`hold_call_boundaries` does it all for a strategy, last, on the tags it would write; last of all, a tag of a
module no call of which ran (a list of layers runs no code; a layer whose caller reads its weight without calling
it computed nothing) goes to its nearest ancestor that ran, whichever rule gave it.

Values settle no region holding a node that reads a weight (one that tells something) equal to a parameter or
buffer of one module alone, off the call's line (neither within the called module nor among its callers): a call
runs no other module's code (a result equal within rounding to a later layer's, where the exporter cancelled the
node holding its own; :func:`call_regions` takes those owners from the strategy), and the call is not bounded.

Only what the values settle is used. A value that tells nothing (a scalar, all one number) places no node,
except an input of one number repeated that exactly one node of the file holds (a mask that masks nothing,
built by the caller), and a result of one number repeated held by the first node holding it after the call began
where every later one is computed from it through a value that tells something or a node reading weights that
tell something (zeros a branch scaled by a zero weight returns, zeros a branch returns that the next layer
multiplies by its weights; not zeros running on through zeros, as faded activations do, through biases of zeros).
A node holds such a number within rounding where its elements, of one sign, lie within :data:`ULPS` units in the
last place of each other (a gate of halves one runtime rounds a unit below in places). A result of one number
repeated that is the very tensor a call made inside returned is held where that call's result is, and by no node
known where that is not known (a stage returning its last block's zeros).
An input of integers no node holds
places none (integers compare exactly: the exporter folded it into its readers). A call is not bounded where
every result tells nothing or is not found, an input is not found, or an input has faded to subnormals (no node is
known to hold it, so nothing bounds the call from below); a result no node holds beside results found (a state
returned that nothing read, which the exporter dropped) places none: the others bound the call, its region pulling
nodes in but pushing none out of the module; a call
some result of which tells nothing (a mask of ones returned beside a tensor) is bounded by the others, its region
pulling nodes in but pushing none out of the module (the nodes computing that result are not known); where every
such result is one integer (a size returned beside a tensor), only integer arithmetic can have computed it, so
the others push out every node computing anything else (a caller's reshape of the result by the returned sizes,
:attr:`Boundaries.sized`); a result
that is the very tensor the call took (a stack returning its input among every layer's states) places nothing,
and the other results bound the call. Nor is a call bounded where an input equals several values written before
the result, unless each later one passes the first on unchanged, or all are data the file computes without the
model's input (a table written once for each reader, positions computed from sizes twice: copies, computing
nothing of the call's, so the input places none of them); where a result equals several values written after the
call began (less those holding results of calls that ended before it began), unless each later one passes the
first on or is computed from it (a later call's value, as a block scaled near zero returns), or the calls begun
after it ended returned as many other tensors equal to it as there are later values computed apart from the first
(those calls ran after it, and exporters write nodes in the order they ran: a norm onto the unit sphere called
again on what it returned, or on the same value twice), and the first is no result of a call it made (a norm at
its initial statistics returns a new tensor equal to its child's result) - but where it is and every later one is
computed from it, the call made its result from its child's after that call returned, and the first later one not
passing the child's result on holds it (a mask of ones multiplied into a child's result), unless a call it made
returned a new tensor equal to what it took (a norm folded into the layer before it made a tensor no node holds);
where a result equals a value the call took (unless a node written after that value holds the result
:data:`DECISIVE` times nearer than the value's node does, or a node equal to it holds the result of a call it made
or is computed from one: the call computed a value of its own, as a norm at its initial statistics does, or a
block adding a branch scaled near zero). Where an input equals values written before the result that are not one
value run on, those holding a tensor met before are not a tensor met for the first time (a slice of a
concatenation giving a layer's result back is a new tensor, held where it was cut out).
Of several node outputs equal to one recorded value, those :data:`DECISIVE` times farther from it than the
nearest are not it. A value runs on unchanged through nodes computing from it, constants and integers alone (a
zero bias added, a cast to the type it has, an expansion to the shape it has, a join with an empty value: a
scatter of no rows), or values computed from
weights, constants and sizes alone (a positional table of zeros, resized to the input's sizes, added), or
values computed from it and constants alone, reading no weight (its sums, dividing it: a normalization
repeated until it settles): a call may have taken or returned it at any of them, but the nodes running a
result on that were written before the call's last result ran in the call (exporters write nodes in the order
they ran), and the last of them holds what it returned (a normalization repeated after it settled, before the
call computed another result). Where it ran on through such
a node after a call's result, the values that node computed from beside the result (not sizes, read where they
are used) and what they were computed from, after the call began, may be the call's too. A value a call took
also runs on unchanged through a node computing a value equal to it from it and anything else (a residual add
of a branch returning zeros).

Some nodes of a region ran in the call or in its caller; the values do not say which, so they are pulled
into neither (:attr:`Boundaries.unplaced`; calls enclosing both still pull them in,
:attr:`Boundaries.undecided`) and not pushed out of that call's module:

- a value the call took that ran on unchanged, and what shaped it (the sizes of a view);
- integers computed from the model's inputs alone (exporters read an input's sizes where they are used, or
  once at the top of the file: no call pulls them in);
- in a call given numbers that are not tensors (sizes, read from a tensor, that the hooks do not see), the
  integer arithmetic giving values equal to them;
- of the arithmetic giving a number a call took (also as a tensor of one integer), the nodes written before its
  first other node, read off no value it took and passing on no number they read: they ran before the call
  began (:attr:`Boundaries.ran_before`), the caller handing the number in. So did, of a call handed a list of
  numbers, a value holding those numbers in order and what the region took of them from it (counts of tokens
  per expert), written before the last node holding a tensor it took, and what computed that value from
  nothing the call took (the floats the counts were summed from);
- where a call returned a new tensor equal to what it took (a norm at its initial statistics, a block whose
  residual branch is scaled near zero, a scale of ones), the nodes passing that value on after the node that
  made it, and those reading that node and holding the value (the returning call's or its caller's); where no
  node was known to hold what the call took when it ended, a later call taking it may tell. The node that made
  it ran in the call that made it, which pulls it in as any call its result: where an exporter fuses a norm into
  the layer before it, the one node is the layer's. But a call that made no call computed the new tensor it
  returned itself, and so did each such call taking what the one before returned: where as many nodes as those
  calls, written after the node holding what the first took, each computed from the one before, hold their
  results (and no other value a call took or returned), each call ran one of them in the order they ran, with the
  nodes computing it from the one before, and so did every call enclosing it (a pooling of a single position, a
  norm at its initial statistics). Not where more nodes do (the caller scaled the result by ones: which one the
  call ran is not settled), nor where such a node reads a value made before that the call did not take (a call
  computes from what it took, weights and constants: a norm folded into the layer before it runs no node, and a
  residual add of a branch returning zeros holds its value). A cast to the type it has is not among those nodes: in
  PyTorch it returns the very tensor it casts, never a new one (a softcap of small values cast to float first).
  A node so placed is settled, not left open, where the values left it between a call enclosing that call and its
  caller: the enclosing call made the call that ran it.

But a node the region of a call made inside the call holds ran in the call, as does a node computed from such
a node that the call's results were computed from: the inner call ran within it (a mask that masks nothing,
computed from a child's result and combined with the mask the call took, leaves that mask's value unchanged).

Where these ran, the values do not settle at all (:attr:`Boundaries.loose`: their tags stay as they are, but out
of a module every call of which took a value they computed, :attr:`Boundaries.ran_before`):

- nodes of a region whose value is also read outside it other than through the call's results (the
  exporter merged an equal computation of the caller's or of a later call into one node);
- integer arithmetic written before the call began that the call read other than through its inputs (an
  exporter moves size computations up, merged with an earlier equal one), but for sizes of a value a caller took
  that the caller's region holds (every reader within its call): a call reads its own input's sizes.

Of the first kind, the integer arithmetic (sizes) written before every node the call kept did run before the call
began (:attr:`Boundaries.ran_before`), unless the call returned a size: a forward reads the sizes it needs as it
begins, before the calls it makes, so where a caller and a call read one size of one tensor, the caller's read came
first and the exporter merged the call's into it.

Where the values are copies the file wrote for each reader, which one a call took is not known, but one written
before the last call result found before the call began ran before it, with what computed it, and one computed
from another copy written since that result (through what its reader computed) was made after that one by its
reader: not the one taken; nor is one computed from constants amid a call that ended before (a table that call made
for its children: its own). Sizes measuring nothing but model inputs a call took itself (the very tensors the model
was given), written after the last call result found before it began and read by its own code alone, were
measured by it (:attr:`Boundaries.measured_by`): a caller hands the tensor on and the call measures it. A call made the
nodes computed from constants alone that hold its result (a table of positions at static sizes: the region
leaves constants out), with the constants computed for them alone (:attr:`Boundaries.made_constant`). A module
every call of which returned tensors of no element alone, of shapes no node of the file holds, ran no node the
file keeps: it is not among the called modules, and neither is any module below it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence

from modelexport_core.format.graph import SHAPE_OPS, used_values
from modelexport_core.format.tags import common_ancestor, in_list_element, in_sibling_elements, is_ancestor
from modelexport_core.format.value_index import TINY, ValueIndex, extremes, faded, informative, measure, same_values

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import onnx
    import torch

    from modelexport_core.format.graph import GraphIndex
    from modelexport_core.format.onnx_file import StreamedModel
    from modelexport_core.plugin.strategy import ExportContext

KEPT_WEIGHT_BYTES = 1 << 20
"""The largest initializer the boundaries keep once read to compare with values no node holds (a mask the exporter
wrote as a weight is small); larger ones are read again where needed."""
ULPS = 16
"""How many units in the last place apart the elements of a value may be and still be taken for one number
repeated where a recorded value is (:func:`_nearly_uniform`): each elementwise step rounds by half a unit, and
two runtimes order a few steps differently."""
DECISIVE = 4.0
"""How many times nearer to a recorded value one node output must be than another, both equal to it within
rounding, to be told apart from it: two runtimes computing one value differ by rounding alone, while a norm
at its initial statistics (a scale of 1/sqrt(1 + 1e-5)) moves it by more than that many times their rounding
after a product of a hundred terms or more."""

EVIDENCE_KIND = "boundary"
"""The evidence a strategy names for a node :func:`hold_call_boundaries` placed."""

Value = tuple[Hashable, "np.ndarray"]
"""A tensor as recorded: a key telling the tensor object and its version apart, and a copy of its elements."""


@dataclass(frozen=True)
class Event:
    """A call beginning (with its inputs) or ending (with its outputs), in the order the model ran them."""

    begins: bool
    module: str
    values: tuple[Value, ...]
    numbers: tuple[float, ...] = ()
    """The numbers the call took that are not tensors and that a node of the file may have computed (sizes read
    from a tensor, when exported, are nodes of the file whose values the hooks do not see). None where the
    calls were recorded under the TorchScript exporter's trace: there such sizes are tensors, and a number
    that is not one is a constant of the trace (:func:`recording_calls`)."""
    weights: frozenset[Hashable] = frozenset()
    """The keys of the values that are the model's own parameters and buffers: no node of the file computes one."""


@dataclass
class CallRegion:
    """What one call's boundary values settle: ``nodes`` ran inside it, ``unsure`` may or may not have."""

    module: str
    nodes: set[int]
    unsure: set[int] = field(default_factory=set)
    span: tuple[int, int] | None = None
    """The first node of the region and the call's last result: the nodes written between them ran while it ran
    (exporters write nodes in the order they ran)."""
    began: int | None = None
    """The last node known to hold a value the call took: the call began after it (where none is known, the first
    node of the region)."""


@dataclass
class Boundaries:
    """Every bounded call's region, and the modules some call of which could not be bounded."""

    regions: list[CallRegion]
    unbounded: set[str]
    loose: set[int] = field(default_factory=set)
    """Nodes whose call the values do not settle at all: left as the strategy tagged them, but out of a module
    every call of which ran after them (``ran_before``)."""
    unplaced: set[int] = field(default_factory=set)
    """Nodes that ran in a call or in its caller: pulled into none of those calls (still moved out of a module
    none of whose calls holds them)."""
    undecided: dict[int, set[str]] = field(default_factory=dict)
    """For the unplaced nodes that ran in a call or in its caller (not the model inputs' integers, which may run
    anywhere): the modules of those calls. Calls enclosing them still pull such a node in."""
    called: set[str] = field(default_factory=set)
    """Every module some call of which ran (bounded or not) and handed something on (not every call returning
    tensors of no element alone, nor a call below one that did); empty where that is not known."""
    ran_before: dict[str, set[int]] = field(default_factory=dict)
    """For each module, the nodes every call of it took values computed from (they ran before it began)."""
    sizes: dict[int, list[int]] = field(default_factory=dict)
    """The integers computed from the model's inputs alone (their sizes), each with the nodes computing anything
    else that read it, directly or through other such integers: exporters read a size where it is used."""
    between: dict[int, tuple[str, str]] = field(default_factory=dict)
    """Nodes passing a call's result on unchanged to a later call that took that very tensor, with the two calls'
    modules: the node ran after the first returned it and before the second's results, in one of them or in a
    caller between them (a module on the line from their common ancestor down to either)."""
    carried: set[int] = field(default_factory=set)
    """Of the ``between`` nodes, those copying the value and reading nothing else (a cast to the type it has, a
    view): nothing says which of the two calls ran them."""
    ran_after: dict[str, set[int]] = field(default_factory=dict)
    """For each module called once, nodes made after its call ended: a tensor a later call took, met for the
    first time and held by one node alone, was made after the last call event, here that call's end; where
    several nodes passing a value on hold it, the first holding that call's result, the last of them (the tensor
    is another than the result, made from it or after it: :func:`_made_after`)."""
    holding: set[int] = field(default_factory=set)
    """The nodes holding a value some call took or returned, and those passing it on: what reads them reads a
    call's value, not the weights it was computed from."""
    handed_on: dict[int, set[str]] = field(default_factory=dict)
    """Nodes passing on a call's result after the node that made it (a shift of zeros added), or the value of
    what it took where it returned a new tensor equal to it (a layer scale of ones), with the modules of those
    calls: the node is that call's or its caller's."""
    shaped_within: dict[int, str] = field(default_factory=dict)
    """Nodes passing a call's result on after the node that made it, shaped by sizes of a value the call made (not
    from its results alone), and the integer arithmetic serving them alone, with the call's module: they ran in it
    (what a call made and did not return no later code reads). Calls in an element of a list of layers are left
    out (the next element may have computed the size again, merged with the first one's node)."""

    sized: set[str] = field(default_factory=set)
    """Modules some call of which returned a size that tells nothing (one integer): their regions bound the nodes
    computing anything but integers (``counting``), which may have computed that size."""
    counting: set[int] = field(default_factory=set)
    """The nodes computing integers (sizes, indices, flags)."""
    built_for: dict[int, list[int]] = field(default_factory=dict)
    """Integer arithmetic turning numbers into the operand of one node alone (a list of sizes made a tensor),
    with that node: the exporter writes it where the operand is used. Sizes it reads count where they are read off
    a value held outside every call (one a call took or returned, the model's input) or off its own integers."""
    crops: dict[int, int] = field(default_factory=dict)
    """Slices taking the whole of a value nothing else reads (cropping nothing), with the node making that value:
    code crops what it padded or joined itself, so such a crop ran where the value was made."""
    made_constant: dict[int, str] = field(default_factory=dict)
    """Nodes computed from constants alone holding a call's result (made after it began, from no value it took: a
    table of positions at static sizes), and the constants computed for them alone since the last call result
    found before it began, with the call's module (of a module called once): the call made them."""
    cast_back: dict[int, str] = field(default_factory=dict)
    """Casts to the type it has of a tensor a call returned, the first node passing it on, with the returning call's
    module, where only calls the call taking it made compute with the cast, or where the returning call cast what
    it took to the type it has: code casts a value where it computes with it, and a call computing in a type of its
    choosing casts its result back as it returns it. Not where the call taking the tensor computes with the cast
    itself, nor into a layer beside the one taking it."""

    returned_through: dict[int, tuple[str, str]] = field(default_factory=dict)
    """Nodes passing on, after the node that made it, a tensor a call returned as a call it made had returned it
    (an attention returning its output projection's result), with the innermost call returning it and the
    outermost: the outer calls ran nothing after the inner one returned it, so the node ran in the inner call or
    after the outer one ended (a scale its caller applied), never in a call on the line between them. Only nodes
    written after the inner call's region (where it was bounded: nodes before it holding the value may be other
    calls', equal at initial weights), and not where the outer calls computed with the node."""
    ended_before: dict[str, int] = field(default_factory=dict)
    """For each module called once, the first node holding a result of a call that began after it ended: that
    node, and every node written after it, ran after the module's call (exporters write nodes in the order they
    ran)."""
    feeding_results: dict[str, set[int]] = field(default_factory=dict)
    """For each module called once whose call returned a new tensor equal to what it took (so bounded nothing):
    the nodes some node holding a value equal to one of its results was computed from, and those nodes. Exporters
    drop what nothing reads, so every node the call ran is among them."""
    measured_by: dict[int, list[str]] = field(default_factory=dict)
    """Of the ``sizes``, those measuring nothing but model inputs that a call took itself (the very tensors the
    model was given, not a view of them), written after the last call result found before that call began and
    computing none of what it took: for each, the modules of such calls. A caller hands a call the tensor and the
    call measures it; where every reader of the size is such a call's own code (none in a call it made: exporters
    merge equal sizes of other tensors into one node), that call measured it."""
    took: dict[str, set[int]] = field(default_factory=dict)
    """For each module, the nodes known to hold a tensor one of its calls took, and those passing it on reading no
    weight: such a node made what the call read before the call began (:class:`Owned`). A node computing with a
    weight made a new tensor, never the very one it read, however equal its value (a scale within rounding of one);
    but one reading a weight equal to a parameter of the module whose call returned that tensor (``weighing``) ran
    in that call, before this one began (a bias of zeros the layer added to its product), and stays."""
    made_in: dict[int, str] = field(default_factory=dict)
    """Unplaced nodes that made a new tensor a call took which its caller was not handed, with the caller's module:
    they ran in that caller (or in a call it made), where no region of it pulls them in (a caller not bounded)."""
    began_after: dict[str, int] = field(default_factory=dict)
    """For each module called once, the last node holding a result of a call that ended before it began: that node,
    and every node written before it, ran before the module's call (exporters write nodes in the order they ran),
    bounded or not."""

    @property
    def bounding(self) -> dict[str, set[int]]:
        """Each module whose every call was bounded: the nodes its calls may hold (regions and unsure nodes)."""
        held: dict[str, set[int]] = defaultdict(set)
        for region in self.regions:
            held[region.module] |= region.nodes | region.unsure
        return {module: nodes for module, nodes in held.items() if module not in self.unbounded}


def tensors_in(value: Any) -> Iterator["torch.Tensor"]:
    """Every tensor in a value, through tuples, lists and dicts (a call's arguments, a model output), in order."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def _copy(tensor: "torch.Tensor") -> "np.ndarray":
    tensor = tensor.detach().cpu()
    return (tensor.float() if tensor.is_floating_point() else tensor).numpy().copy()


def record_calls(model: "torch.nn.Module", run: Callable[[], object]) -> list[Event]:
    """Run ``run()`` with hooks on every module of ``model`` (:func:`recording_calls`) and return the events."""
    with recording_calls(model) as events:
        run()
    return events


@contextmanager
def recording_calls(model: "torch.nn.Module") -> Iterator[list[Event]]:
    """While the block runs, hooks on every module of ``model`` record each call's tensor inputs as it begins and its
    tensor outputs as it ends in the list yielded. Tensors are told apart by object and version (an in-place op makes
    a new version); each tensor version is copied once, however many calls take or return it (a caller's input is
    most often its first child's too), and no tensor is kept alive for it: an object that died and one that took its
    identity get different keys. Under the TorchScript exporter's trace, the copies are made with tracing off: the
    values are the ones the file is made from, and the trace records nothing of the copying; the numbers a call
    took that are not tensors are left out of its event there (constants of the trace: ``Event.numbers``)."""
    import weakref

    import torch

    events: list[Event] = []
    copies: dict[Hashable, "np.ndarray"] = {}
    objects: dict[int, tuple[int, weakref.ref]] = {}  # id -> (how many objects had it, the last of them)

    def key(tensor: "torch.Tensor") -> Hashable:
        number, ref = objects.get(id(tensor), (-1, None))
        if ref is None or ref() is not tensor:
            number += 1
            objects[id(tensor)] = (number, weakref.ref(tensor))
        return id(tensor), number, tensor._version

    def values(found: Any) -> tuple[Value, ...]:
        recorded = []
        tracing = torch._C._get_tracing_state()
        if tracing is not None:
            torch._C._set_tracing_state(None)  # type: ignore[attr-defined]  # no stub; the tracer's own switch
        try:
            for tensor in tensors_in(found):
                name = key(tensor)
                if name not in copies:
                    copies[name] = _copy(tensor)
                recorded.append((name, copies[name]))
        finally:
            if tracing is not None:
                torch._C._set_tracing_state(tracing)  # type: ignore[attr-defined]
        return tuple(recorded)

    def numbers(found: Any) -> tuple[float, ...]:
        # under the TorchScript exporter's trace a size read of a tensor is a tensor; a number that is not one is
        # a constant of the trace, which no node of the file computes (a value fixed in the code, or a size made
        # a plain number: the file holds it as a constant)
        return () if torch._C._get_tracing_state() is not None else tuple(_numbers_in(found))

    own = {id(tensor) for tensor in (*model.parameters(), *model.buffers())}  # the model's weights
    handles = []
    for qualname, module in model.named_modules():
        def begin(_: object, args: tuple, kwargs: dict, name: str = qualname) -> None:
            taken = values((args, kwargs))
            mine = frozenset(key for (key, _), tensor in zip(taken, tensors_in((args, kwargs)))
                             if id(tensor) in own)
            events.append(Event(True, name, taken, numbers((args, kwargs)), mine))

        def end(_: object, args: tuple, kwargs: dict, output: object, name: str = qualname) -> None:
            events.append(Event(False, name, values(output)))

        handles.append(module.register_forward_pre_hook(begin, with_kwargs=True))
        handles.append(module.register_forward_hook(end, with_kwargs=True))
    try:
        yield events
    finally:
        for handle in handles:
            handle.remove()


def made_for_readers(graph: "onnx.GraphProto", constant: set[int], weighed: bool = False) -> dict[int, list[int]]:
    """The constants computed from no weight (what the exporter writes for the operation reading it), each with
    the nodes computing from the graph's inputs that read it, directly or through other constants (the sizes of
    a padding computed in several constant steps serve the one node padding a value). With ``weighed``, instead
    the constants reading a weight (a function of a parameter: its sigmoid, its transpose)."""
    weights = {tensor.name for tensor in graph.initializer}
    producer = {name: i for i, node in enumerate(graph.node) for name in node.output if name}
    readers = _readers(graph, producer)
    served = _served(constant, readers)
    return {i: sorted(served[i]) for i in constant
            if any(name in weights for name in graph.node[i].input) == weighed}


def _served(nodes: set[int], readers: Mapping[int, Iterable[int]]) -> dict[int, set[int]]:
    """For each of ``nodes``, the nodes outside them that read it, directly or through others of them."""
    served: dict[int, set[int]] = {}
    for i in sorted(nodes, reverse=True):  # a node's readers come after it
        served[i] = set()
        for reader in readers.get(i, ()):
            served[i] |= served.get(reader, set()) if reader in nodes else {reader}
    return served


def _readers(graph: "onnx.GraphProto", producer: Mapping[str, int]) -> dict[int, set[int]]:
    """Each node's readers, by node: a node holding branches or a loop body reads what they read from outside them
    (``used_values``)."""
    readers: dict[int, set[int]] = defaultdict(set)
    for i, node in enumerate(graph.node):
        for name in used_values(node):
            if name in producer:
                readers[producer[name]].add(i)
    return readers


def constant_nodes(graph: "onnx.GraphProto", sizes: bool = False) -> set[int]:
    """The nodes computed from no graph input (constants, weights' copies, what is folded from them); with
    ``sizes``, also from the sizes of any value (no element of the data reaches them: a positional table resized to
    the input's sizes). A node reads what its branches or loop body read from outside them (``used_values``)."""
    inputs = {value.name for value in graph.input}
    producer: dict[str, int] = {}
    constant: set[int] = set()
    for i, node in enumerate(graph.node):
        if sizes and node.op_type in SHAPE_OPS or all(
                name not in inputs and (name not in producer or producer[name] in constant)
                for name in used_values(node)):
            constant.add(i)
        for name in node.output:
            producer[name] = i
    return constant


def call_regions(graph: "onnx.GraphProto", values: dict[str, "np.ndarray"], events: list[Event],
                 model_inputs: list["np.ndarray"],
                 weight: Callable[["onnx.TensorProto"], "np.ndarray"] | None = None,
                 owned: Mapping[int, str] | None = None, input_names: Sequence[str] = (),
                 weighing: Mapping[int, Collection[str]] | None = None) -> Boundaries:
    """The region of every call whose boundary values settle it (module docstring), from ``values``: the
    file's node outputs on the inputs the model ran on (``model_inputs``). ``weight``: an initializer's value
    where the graph holds it without its data (else it is read from the graph). ``owned``: nodes reading a weight
    equal to a parameter or buffer of one module alone, with that module: a call runs no node reading the weights of
    a module neither within it nor among its callers, so values settling such a region (a result equal within
    rounding to a later layer's, where its own holder is gone) settle nothing and the call is not bounded.
    ``input_names``: the graph inputs ``model_inputs`` were given as, in their order, where known
    (:attr:`Boundaries.measured_by`). ``weighing``: nodes reading a weight equal to parameters or buffers, with
    every module holding an equal one (:attr:`Boundaries.took`)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    producer = {name: i for i, node in enumerate(graph.node) for name in node.output if name}
    constant = constant_nodes(graph)
    several = {i for i, node in enumerate(graph.node) if sum(1 for name in node.output if name) > 1}  # a split's
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    sizes = {tensor.name: int(np.prod(tensor.dims)) if tensor.data_type in floats else 0 for tensor in graph.initializer}
    index: ValueIndex[str] = ValueIndex()
    index_names: set[str] = set()
    uniform: dict[tuple, list[int]] = defaultdict(list)  # values of one number repeated: by shape, type, number
    nearly: dict[tuple, list[str]] = defaultdict(list)  # and those within rounding of one number: by shape, type
    empty: dict[tuple, list[int]] = defaultdict(list)  # the nodes holding tensors of no element: by shape, type
    for name, value in values.items():
        if name in producer and hasattr(value, "dtype") and value.size == 0:
            empty[(value.shape, value.dtype.str)].append(producer[name])
        elif name in producer and hasattr(value, "dtype"):
            ends = extremes(value)  # read once for the three questions below
            if informative(value, ends=ends):
                index.add(name, value, measure(value, ends))
                index_names.add(name)
                if _nearly_uniform(value, ends):
                    nearly[(value.shape, value.dtype.str)].append(name)
            elif (number := _uniform(value)) is not None:
                uniform[number].append(producer[name])

    def holding_empty(array: "np.ndarray") -> list[int]:
        """The nodes holding a tensor of no element of ``array``'s shape and type, in graph order: all are equal."""
        return sorted(empty.get((array.shape, array.dtype.str), ()))

    def holding_one_number(array: "np.ndarray") -> list[int]:
        """The nodes holding a value of one number repeated, in graph order: those holding exactly that number, and
        those holding it within rounding (one runtime rounds an element the other does not: a gate of halves, one
        element a unit in the last place below)."""
        number = _uniform(array)
        if number is None:
            return []
        near = [producer[name] for name in nearly.get(number[:2], ()) if same_values(array, values[name])]
        return sorted({*uniform.get(number, ()), *near})

    readers: dict[int, list[int]] = defaultdict(list)
    made_from: list[list[int]] = []  # each node's producers, by node
    for i, node in enumerate(graph.node):
        made_from.append([producer[name] for name in used_values(node) if name in producer])
        for j in made_from[i]:
            readers[j].append(i)

    def ancestors(nodes: list[int] | set[int], floor: int = -1, within: set[int] | None = None) -> set[int]:
        """``nodes`` and the nodes they are computed from, written after ``floor`` (nodes are in topological
        order, so every path from a node after it to one after it stays after it), through ``within`` alone."""
        seen: set[int] = set()
        stack = [i for i in nodes if i > floor]
        while stack:
            i = stack.pop()
            if i not in seen:
                seen.add(i)
                stack.extend(j for j in made_from[i] if j > floor and j not in seen and (within is None or j in within))
        return seen

    def computed_from(seeds: set[int], among: Iterable[int]) -> set[int]:
        """The nodes of ``among`` computed from a node of ``seeds`` or from one such node of ``among`` (nodes are in
        topological order, so one pass in that order finds them all)."""
        found: set[int] = set()
        for i in sorted(among):
            if any(j in seeds or j in found for j in made_from[i]):
                found.add(i)
        return found

    def computed_before(taken: list[int], floor: int) -> set[int]:
        """What computed the values held by ``taken`` (nodes holding what a call took), back to ``floor`` (where
        the call's caller began), and what computed those of them made from the model's inputs alone, however
        early: the call began once they existed."""
        return ancestors(taken, floor) | ancestors([i for i in taken if i in of_inputs], within=of_inputs)

    def measured(node: int) -> set[int]:
        """The nodes computing something other than integers whose values (their sizes) an integer node reads."""
        arithmetic = ancestors([node], within=integer)
        return {producer[name] for i in arithmetic for name in graph.node[i].input if name in producer} - arithmetic

    def descends(later: int, earlier: int) -> bool:
        """Whether node ``later`` is computed from node ``earlier``'s output."""
        return earlier in ancestors([later], earlier - 1)

    def reads_beside(later: int, earlier: int) -> bool:
        """Whether node ``later`` reads, beside node ``earlier``'s output, floats computed from the model's inputs
        and not from that output (a mask built from the model's own mask, multiplied in)."""
        made = set(graph.node[earlier].output)
        return any(name not in made and name in producer and producer[name] not in data_free
                   and getattr(values.get(name), "dtype", None) is not None and values[name].dtype.kind in "fc"
                   and values[name].size > 0 and not descends(producer[name], earlier)
                   for name in graph.node[later].input if name)

    def equal_tensors(first: "np.ndarray", second: "np.ndarray") -> bool:
        """Whether two recorded tensors have one shape, one type and the same values."""
        return first.shape == second.shape and first.dtype == second.dtype and same_values(first, second)

    def computed_from_taken(node: int, taken: set[int]) -> bool:
        """Whether node ``node`` is one of ``taken`` (the nodes holding what a call took) or computed from one."""
        return node in taken or any(descends(node, held) for held in taken if held < node)

    def untaken(node: int, taken: set[int]) -> bool:
        """Whether node ``node`` computes data (not from weights, constants and sizes alone) that is not
        ``computed_from_taken``: a value the call was not handed."""
        return node not in data_free and not computed_from_taken(node, taken)

    def sized_beside(later: int, earlier: int, taken: set[int]) -> bool:
        """Whether node ``later`` reads, beside node ``earlier``'s output, integers computed from the sizes of
        values (not the model's inputs alone: exporters read those once and share them) that are ``untaken`` and
        not computed from ``earlier``."""
        made = set(graph.node[earlier].output)
        for name in graph.node[later].input:
            if not name or name in made or name not in producer:
                continue
            node = producer[name]
            if node not in integer or node in of_inputs or node in constant:
                continue
            sources = measured(node)
            if sources and all(untaken(source, taken) and not descends(source, earlier) for source in sources):
                return True
        return False

    def reads_untaken(later: int, earlier: int, taken: set[int]) -> bool:
        """Whether node ``later`` reads, beside node ``earlier``'s output, a tensor a call holding ``taken`` (the
        nodes holding what it took) was not handed: one computed from data or sizes (not from constants and weights
        alone), of more than one element and not a list of integers (no numbers handed over), and computed from none
        of ``taken`` nor from ``earlier``."""
        made = set(graph.node[earlier].output)
        for name in graph.node[later].input:
            if not name or name in made or name not in producer:
                continue
            node, value = producer[name], values.get(name)
            if value is None or node in constant or getattr(value, "size", 0) <= 1 \
                    or node in integer and value.ndim <= 1:
                continue
            if not computed_from_taken(node, taken) and not descends(node, earlier):
                return True
        return False

    telling_nothing = {i for i, node in enumerate(graph.node)
                       if not any(name in index_names for name in node.output if name)}

    initializers = {tensor.name: tensor for tensor in graph.initializer}
    weighted = {i for i, node in enumerate(graph.node)  # nodes reading weights (an initializer of many floats)
                if any(name in initializers and sizes.get(name, 0) > 1 for name in node.input)}
    told: dict[str, bool] = {}

    def tells(name: str) -> bool:
        """Whether a tensor of weights says something (not all one number, not faded); False where its data is
        not in the graph (a file read without its weights): then it is not known to."""
        if name not in told:
            array = values.get(name)
            if array is None and name in initializers:
                try:
                    array = (weight or numpy_helper.to_array)(initializers[name])
                except Exception:  # noqa: BLE001 - a stub without its data
                    array = None
                if array is not None and array.size != int(np.prod(initializers[name].dims)):
                    array = None
            told[name] = array is not None and informative(array)
        return told[name]

    quiet: set[int] | None = None  # nodes telling nothing that read no weights telling something

    def descends_telling_nothing(later: int, earlier: int) -> bool:
        """Whether node ``later`` is computed from node ``earlier``'s output through nodes telling nothing alone
        (each value one number repeated, or faded), none of them (``later`` included) reading weights that tell
        something: the value may have run on from one to the other. A product with a layer's weights is a
        layer's step, however little its value tells (zeros times weights are zeros)."""
        nonlocal quiet
        if quiet is None:
            quiet = {i for i in telling_nothing if not any(weighs(name) and tells(name) for name in graph.node[i].input)}
        return later in quiet and earlier in ancestors([later], earlier - 1, within=quiet | {earlier})

    def weighs(name: str) -> bool:
        """Whether a value is a tensor of weights: floats, more than one, from no graph input (an initializer,
        or what is computed from initializers alone)."""
        if name in sizes:
            return sizes[name] > 1
        value = values.get(name)
        return name in producer and producer[name] in data_free and value is not None \
            and getattr(value, "dtype", None) is not None and value.dtype.kind in "fc" and value.size > 1

    def from_alone(name: str, earlier: int) -> bool:
        """Whether a value is computed from node ``earlier``'s output and constants alone, reading no weight (its
        sum, to divide it by: a normalization repeated until it settles)."""
        if name not in producer or producer[name] <= earlier:
            return False
        steps = ancestors([producer[name]], earlier)
        made = set(graph.node[earlier].output)
        return all(value in made or value in producer and producer[value] in steps
                   or value not in graph_inputs and (value not in producer or producer[value] in data_free)
                   and not weighs(value)
                   for i in steps for value in graph.node[i].input if value)

    def passes_on(later: int, earlier: int, ending: bool = False) -> bool:
        """Whether node ``later`` computes from node ``earlier``'s output, constants, integer values (shapes,
        indices) and empty values (no element to add: a scatter of no rows) alone: equal to it, it passed it
        on. ``ending``: on from a call's result, a node reading weights passes the value on only where it is
        the value's one reader that reads its elements (a bias of zeros added to a layer's product; a node
        reading only its sizes aside); one of several readers computes from the result the call handed out
        (the next block's norm at its initial statistics, beside the block's other layers reading the same
        value). Else (not ``ending``) a node reading the value and computing an equal one passes it on
        whatever else it reads (a residual add of a branch that returns zeros): a call taking that value took
        it at either."""
        weights = not ending or len([i for i in readers.get(earlier, ()) if i not in sizing]) <= 1
        made = set(graph.node[earlier].output)
        reads = [name for name in graph.node[later].input if name]
        if not any(name in made for name in reads):
            return False
        if all(name in made or (name not in producer or producer[name] in data_free) and (weights or not weighs(name))
               or getattr(values.get(name), "dtype", None) is not None and values[name].dtype.kind in "iub"
               or getattr(values.get(name), "size", None) == 0
               or from_alone(name, earlier)
               for name in reads):
            return True
        return not ending and any(
            hasattr(values.get(mine), "shape") and hasattr(values.get(theirs), "shape")
            and same_values(values[mine], values[theirs])
            for mine in graph.node[later].output for theirs in made)

    passed_through: dict[tuple[int, int], bool] = {}

    def passes_through(later: int, earlier: int, ending: bool = False) -> bool:
        """:func:`passes_on`, or (not ``ending``) ``later`` computed from ``earlier`` through nodes each passing
        on what it reads (:func:`passes_on`), whatever their values: a view turned back into the value's own
        layout (windows of a size the whole input has, a transpose and its reverse) hands the value on."""
        if ending or passes_on(later, earlier):
            return passes_on(later, earlier, ending)
        if (later, earlier) not in passed_through:
            passed_through[(later, earlier)] = False
            passed_through[(later, earlier)] = any(
                j > earlier and passes_on(later, j) and (passes_on(j, earlier) or passes_through(j, earlier))
                for j in made_from[later])
        return passed_through[(later, earlier)]

    def carries(node: int, key: Hashable) -> bool:
        """Whether a node passing a tensor's value on reads nothing but that value (as the nodes holding it hold
        it), sizes and constants: a cast to the type it has, a view."""
        passing = {known[key], *runs_on.get(key, ())} if key in known else set()
        return all(name in producer and producer[name] in passing
                   or getattr(values.get(name), "dtype", None) is not None and values[name].dtype.kind in "iub"
                   or (name not in producer or producer[name] in data_free) and not weighs(name)
                   for name in graph.node[node].input if name)

    def casts_as_it_is(node: int, key: Hashable) -> bool:
        """Whether a node casts tensor ``key`` to the type it has, reading nothing else (:func:`carries`)."""
        return graph.node[node].op_type in CASTS and carries(node, key)

    def distance(name: str, array: "np.ndarray") -> float:
        """The largest difference between a node output and a recorded value (NaN where they disagree on NaNs)."""
        held = values[name]
        if not held.size:
            return 0.0
        with np.errstate(invalid="ignore", over="ignore"):  # in double precision, each element cast as it is read
            apart = np.subtract(held, array, dtype=np.float64)
            return float(np.nanmax(np.abs(apart, out=apart)))

    def nearest(names: list[str], array: "np.ndarray") -> list[str]:
        """Of the node outputs equal to a recorded value within rounding, those not decisively farther from it than
        the nearest (:data:`DECISIVE` times): the recorded value is theirs, the others differ from it by what
        a computation changed (a norm at its initial statistics, a residual branch scaled near zero)."""
        if len(names) < 2 or array.dtype.kind != "f":
            return names
        apart = {name: distance(name, array) for name in names}
        best = min(apart.values())
        return [name for name in names if not apart[name] > DECISIVE * best + TINY]

    looked_up: dict[int, tuple["np.ndarray", list[str]]] = {}  # by the recorded array's id (kept alive with it)
    of_size: dict[int, list[str]] | None = None  # the initializers by their number of elements
    weights_read: dict[str, "np.ndarray | None"] = {}  # the small initializers read so far, and those without data
    folded_before: dict[int, tuple["np.ndarray", bool]] = {}  # by the recorded array's id, as ``looked_up``

    def initializer_value(name: str) -> "np.ndarray | None":
        """An initializer's value (None: a stub without its data). Those of at most :data:`KEPT_WEIGHT_BYTES` are
        kept for the next look; larger ones are read again (the pass would otherwise hold a copy of each)."""
        if name in weights_read:
            return weights_read[name]
        try:
            value = (weight or numpy_helper.to_array)(initializers[name])
        except Exception:  # noqa: BLE001 - a stub without its data
            value = None
        if value is None or value.nbytes <= KEPT_WEIGHT_BYTES:
            weights_read[name] = value
        return value

    def folded(array: "np.ndarray") -> bool:
        """Whether an initializer of the file holds a value's elements, in any shape: the exporter computed it
        from constants and wrote the result (a mask built from fixed sizes), so no node of the file made it."""
        nonlocal of_size
        if (seen_before := folded_before.get(id(array))) is not None and seen_before[0] is array:
            return seen_before[1]
        if of_size is None:
            of_size = defaultdict(list)
            for tensor in graph.initializer:
                of_size[int(np.prod(tensor.dims))].append(tensor.name)
        for name in of_size.get(array.size, ()):
            held = initializer_value(name)
            if held is not None and held.dtype == array.dtype and held.size == array.size \
                    and same_values(held.reshape(array.shape), array):
                folded_before[id(array)] = (array, True)
                return True
        folded_before[id(array)] = (array, False)
        return False

    def find(array: "np.ndarray") -> list[str]:
        """The file's node outputs equal to a recorded value, the nearest of several (:func:`nearest`); where none
        is, those holding each row's elements in another order (:func:`_rows_reordered`). Each recorded value is
        looked up once (calls share the tensors they hand on)."""
        if (seen_before := looked_up.get(id(array))) is not None and seen_before[0] is array:
            return list(seen_before[1])
        found = index.find(array)
        if found or array.ndim < 2:
            found = nearest(found, array)
        else:
            found = [name for name in index.find_permuted(array) if _rows_reordered(values[name], array)]
        looked_up[id(array)] = (array, found)
        return list(found)

    def made_later(key: Hashable, holders: list[int]) -> bool:
        """Whether a node equal to a tensor a call took cannot hold it: a tensor an earlier call returned, not one
        it took, was computed after that call began, so where that call ran nodes (the calls it made hold nodes of
        the file) no node written before it began (at or before the last call result found then) holds it, however
        equal its value (a layer at its initial weights returning what it took, changed by less than two runtimes'
        rounding, to the next layer). A call that ran no node may have been folded into the nodes around it: then
        an equal value written before serves. Nodes computed from constants alone are exempt (the exporter writes
        them anywhere)."""
        began = made_since.get(key)
        return began is not None and any(i <= began and i not in data_free for i in holders)

    def apart_from_what_it_took(array: "np.ndarray", given_key: Hashable, mark: int) -> bool:
        """Whether a result equal to a value the call took within rounding is a value the call computed of its own
        (a norm at its initial statistics, a block adding a branch scaled near zero), written after it began: a
        node of the file equal to it holds the result of a call made inside it (the nodes claimed from ``mark``
        on) or is computed from one, which only the call's own code can have done; or such a node is decisively
        nearer to it than the node holding what it took."""
        if not informative(array):
            return False
        made_inside = {node for node, number in claimed.items() if number >= mark}
        if made_inside and any(made_inside & ancestors([producer[name]], min(made_inside) - 1)
                               for name in index.find(array)):
            return True
        if given_key not in known:
            return False
        taken = next((name for name in graph.node[known[given_key]].output if name in values), None)
        if taken is None or not hasattr(values[taken], "shape") or values[taken].shape != array.shape:
            return False
        own = [name for name in index.find(array) if producer[name] > known[given_key]]
        return bool(own) and taken not in nearest([taken, *own], array)

    def repeats(later: int, earlier: int) -> bool:
        """Whether node ``later`` computes what node ``earlier`` does: one operator, its attributes, the same inputs."""
        first, second = graph.node[earlier], graph.node[later]
        return (second.op_type, second.domain, list(second.input)) == (first.op_type, first.domain, list(first.input)) \
            and [a.SerializeToString() for a in second.attribute] == [a.SerializeToString() for a in first.attribute]

    def copies(holders: list[int]) -> bool:
        """Whether the nodes holding a value are copies of data the file wrote more than once (a table written for
        each reader): none computes anything, so the value places none of them. Not where each holder passes
        the first one's value on (:func:`passes_through`): the file wrote it once (a mask built from sizes,
        then expanded), where the first holds it."""
        if len(holders) < 2 or not all(i in data_free for i in holders):
            return False
        ordered = sorted(holders)
        return not all(passes_through(later, ordered[0]) for later in ordered[1:])

    def is_input(array: "np.ndarray") -> bool:
        return any(array.shape == given.shape and np.array_equal(array, given) for given in model_inputs)

    model_given = {key for event in events[:1] if event.begins for key, _ in event.values}  # the model's own inputs

    def reads_telling_weight(node: int) -> bool:
        """Whether a node reads an initializer that is a weight (:func:`weighs`) telling something (:func:`tells`;
        not one number repeated: zeros equal part of any bias, so they name no owner)."""
        return any(name in initializers and weighs(name) and tells(name) for name in graph.node[node].input if name)
    integer = {i for i, node in enumerate(graph.node)  # the nodes computing integers (sizes, indices, flags)
               if all(getattr(values.get(name), "dtype", None) is not None and values[name].dtype.kind in "iub"
                      for name in node.output if name)}
    sizing = {i for i, node in enumerate(graph.node) if node.op_type in SHAPE_OPS}  # read no element
    graph_inputs = {value.name for value in graph.input}
    data_free = constant_nodes(graph, sizes=True)  # computed from weights, constants and sizes alone
    # integers computed from the model's inputs alone (their sizes, integer inputs): exporters read them where
    # they are used or once at the top, so no call's values place them
    of_inputs = _size_arithmetic(set(range(len(graph.node))), graph, producer, integer, closed=True) - constant
    known: dict[Hashable, int] = {}  # a tensor seen before: the node that made it
    runs_on: dict[Hashable, list[int]] = {}  # the nodes its value runs on unchanged through
    cursor = -1  # the last call result found so far
    begun: list[tuple[int, tuple[Value, ...], tuple[float, ...], int, set[Hashable], str | None, str]] = []
    claimed: dict[int, int] = {}  # the nodes holding calls' results, each with the number claimed before it
    regions: list[CallRegion] = []
    unbounded: set[str] = set()
    sized: set[str] = set()  # modules some call of which returned a size that tells nothing
    loose: set[int] = set()
    moved_up: set[int] = set()  # integer arithmetic a call read, written before it began
    sized_own: set[int] = set()  # integer arithmetic a region holds reading sizes of what its call took
    unplaced: set[int] = set()
    undecided: dict[int, set[str]] = defaultdict(set)
    made_in: dict[int, str] = {}
    calls_before: list[tuple[str, set[int]]] = []  # each call's module, with the nodes that ran before it began
    seen: set[Hashable] = set()  # the tensors some call took or returned so far
    weights = frozenset(key for event in events for key in event.weights)  # no node computes one: see Event.weights
    took_keys: dict[str, set[Hashable]] = defaultdict(set)  # the tensors each module's calls took
    for event in events:
        if event.begins:
            took_keys[event.module].update(key for key, _ in event.values)
    returned_by: dict[Hashable, str] = {}  # each tensor a call returned: the module of the first call returning it
    made_since: dict[Hashable, int] = {}  # each tensor a call running nodes returned (not one it took): where it began
    between: dict[int, tuple[str, str]] = {}
    carried: set[int] = set()
    timed: set[int] = set()
    sized_in: set[int] = set()  # sizes a call computed from a number handed to it
    calls_of = Counter(event.module for event in events if event.begins)
    first_result: list[tuple[int, int]] = []  # each bounded call: the position it began at, its first result node
    last_result: list[tuple[int, int]] = []  # each bounded call: the position it ended at, its last result node
    looked_at: set[Hashable] = set()  # results whose nodes passing them on were looked at (by the call making them)
    shaped_within: dict[int, str] = {}  # nodes passing a call's result on, shaped from what it made: they ran in it
    made_constant: dict[int, str] = {}  # constant nodes making a call's result, and what served them alone
    ran_after: dict[str, set[int]] = defaultdict(set)
    handed_on: dict[int, set[str]] = defaultdict(set)
    ended_inside: set[int] = set()  # the nodes of the regions of calls that ended, but their results
    # the model's own input tensors (by the root call's keys), with the graph inputs equal to each
    given_as: dict[Hashable, set[str]] = {
        key: {name for name, array in zip(input_names, model_inputs) if name in graph_inputs
              and array.shape == given.shape and array.dtype == given.dtype and np.array_equal(array, given)}
        for event in events[:1] if event.begins for key, given in event.values}
    taking_inputs: list[tuple[str, int, set[str]]] = []  # calls taking model inputs themselves: module, start, names
    ended_spans: list[tuple[int, int]] = []  # of each such region, its first kept node and its last result

    def ran_inside_ended(node: int) -> bool:
        """Whether ``node`` ran inside a call that ended, and is none of its results: a node of its region, or one
        computed from constants written amid it (a table the call made for its children; exporters write nodes
        in the order they ran). A later call takes no such node's tensor: an equal one was computed again."""
        return node in ended_inside or node in constant and bool(graph.node[node].input) \
            and node not in claimed and any(low < node < high for low, high in ended_spans)
    # what calls took and returned equal new tensors of (the tensor taken, the one returned), and whether the call
    # made no call
    equal_after: list[tuple[Hashable, Hashable, "np.ndarray", str, bool]] = []
    remade_at: list[int] = []  # the end events of calls returning a new tensor equal to one they took, in order
    ended: str | None = None  # the module whose call ended at the last event, where it was an end
    began_at: dict[int, int] = {}  # each end event's position: the position of its call's beginning
    feeding_results: dict[str, set[int]] = {}
    opened: list[int] = []
    regions_before: dict[int, int] = {}  # each begin event's position: how many calls had been bounded by then
    for position, event in enumerate(events):
        if event.begins:
            opened.append(position)
        else:
            began_at[position] = opened.pop()

    def returned_later(position: int) -> Callable[[Hashable, "np.ndarray"], int]:
        """How many tensors other than a given one, equal to it, the calls begun after the call ending at
        ``position`` returned."""
        return lambda key, array: len({
            other_key for end, begin in began_at.items() if begin > position for other_key, other in events[end].values
            if other_key != key and other.shape == array.shape and other.dtype == array.dtype
            and same_values(other, array)})

    def runs_inner(module: str) -> Callable[[int, Hashable], bool]:
        """For a call of ``module``: whether a node reads the weights of a module within it (``owned``), and no call
        it made returned a tensor (by key; see ``_bound``)."""
        def reads_inner(node: int, key: Hashable) -> bool:
            owner = (owned or {}).get(node)
            return returned_by.get(key) == module and owner is not None and owner != module \
                and is_ancestor(module, owner)
        return reads_inner

    def made_after(position: int, start: int) -> Callable[[], int | None]:
        """A node the call ending at ``position`` wrote its results before: the last node holding the value of the
        first tensor a later call took or returned that no call took or returned before that call ended (nor the
        model's input, nor a weight). That tensor was computed after the call ended, so the node that made it, one
        of those holding its value, comes after the call's own nodes. None where no node holds it."""
        def first() -> int | None:
            for later in events[position + 1:]:
                for key, array in later.values:
                    if key not in seen and key not in weights and informative(array) and not is_input(array):
                        return max((producer[name] for name in find(array)), default=None)
            return None
        return first

    given_by: set[int] = set()  # the nodes that may hold a value a bounded call took
    returned_through: dict[int, tuple[str, str]] = {}
    bounded_at: dict[str, CallRegion] = {}  # each module's last bounded call's region
    bounded_taking: dict[Hashable, list[CallRegion]] = defaultdict(list)  # by tensor: regions of the calls taking it
    ended_holding: set[int] = set()  # the nodes holding the results of the call that ended at the last event
    cast_back: dict[int, str] = {}  # casts of a call's result that call ran, with its module
    cast_of: dict[int, Hashable] = {}  # those casts: the result they cast
    cast_in: dict[int, tuple[int, Hashable]] = {}  # casts of a value a call took that it ran: its end, the tensor
    read_later: dict[int, tuple[str, set[int]]] = {}  # those casts: the call, and their readers after it
    for position, event in enumerate(events):
        if event.begins:
            fresh = {key for key, _ in event.values if key not in seen and key not in weights}
            seen.update(key for key, _ in event.values)
            opening = events[position - 1] if position and events[position - 1].begins else None
            if opening is not None and calls_of[opening.module] == 1 and fresh and all(
                    key in known or not informative(array) or is_input(array) for key, array in opening.values):
                opener = opening.module
                # a new tensor a call takes right after its caller began (no call ended in between) was made by
                # the caller's own code: the first node holding it, and what computed it after every node holding
                # a tensor met before, ran in the caller (where the nodes holding what the caller took are known:
                # else the value may have been there before the caller began, and a node equal to it found by value
                # may be another layer's, equal within rounding at initial scales)
                floor = max(known.values(), default=-1)
                # (back to the nodes holding tensors met before, or passing them on: a cast of what the caller
                # took to the type it has may be an earlier call's, merged with an equal one)
                met = {*known.values(), *(i for chain in runs_on.values() for i in chain)}
                stack = [node for node in _made_within(event.values, fresh, floor, find, producer, is_input, copies,
                                                       descends, holding_empty) if node not in met]
                while stack:
                    made = stack.pop()
                    if made not in shaped_within:
                        shaped_within[made] = opener
                        stack.extend(j for j in made_from[made] if j > floor and j not in met and j not in data_free)
            if ended is not None and calls_of[ended] == 1 and ended_holding:
                ran_after[ended].update(_made_after(event.values, fresh, ended_holding, set(known.values()),
                                                    find, producer, is_input, passes_on, data_free))
            begun.append((cursor, event.values, event.numbers, len(claimed), fresh, ended, event.module))
            regions_before[position] = len(regions)
            ended = None
            continue
        seen.update(key for key, _ in event.values)
        start, inputs, numbers, mark, fresh, after, _ = begun.pop()
        if inputs_taken := {name for key, _ in inputs for name in given_as.get(key, ())}:
            taking_inputs.append((event.module, start, inputs_taken))
        ended = event.module
        ended_holding = set()
        # the call began once the values it took existed: the nodes they were computed from ran before it (back
        # to where its caller began: no call of the module ran them, whatever its results tell). A value met for
        # the first time is held by the first node equal to it at the latest, unless it is the model's input (no
        # node holds it: the nodes equal to it may be the call's own, a scale of ones)
        # (a node inside a call that ended, other than its results, holds no tensor a later call takes: an equal
        # one was computed again, a reshape the caller wrote of what an earlier child reshaped for itself). Of
        # copies the file wrote for each reader, which one it took is not known, but one written before the last
        # call result found before it began (``start``) ran before it, as did what computed that copy
        taken = [known[key] if key in known else min([i for i in holders if not ran_inside_ended(i)] or holders)
                 for key, array in inputs
                 if key in known or informative(array) and not is_input(array) and key not in weights
                 and (holders := [producer[name] for name in find(array)])
                 and not made_later(key, holders)  # (else the values do not say which node held it)
                 and (not copies(holders) or min(holders) <= start)]
        # (so did what computed a value it took from the model's inputs alone, a mask or positions, however early)
        ran_before = computed_before(taken, begun[-1][0] if begun else -1)
        calls_before.append((event.module, ran_before))
        returned = [(key, given_key) for key, array in event.values for given_key, given in inputs
                    if equal_tensors(array, given)
                    and not apart_from_what_it_took(array, given_key, mark)
                    and (key == given_key or given_key not in weights)]  # (a new tensor equal to a weight it
        # took was computed by the call: no node computes a weight, see Event.weights)
        # a tensor the call took and handed back as it was (a stack returning its input among every layer's
        # states) was made before it began: where the call returned more, those bound it
        handed_back = {key for key, given_key in returned if key == given_key}
        results_of = tuple((key, array) for key, array in event.values if key not in handed_back)
        # a result of one number repeated that is the very tensor an earlier call returned (one it made) is held
        # where that call's result is: where that is not known, no node is known to hold it
        made_before = {key for key, array in results_of
                       if key in returned_by and key not in known and not informative(array)}
        for key, _ in results_of:
            returned_by.setdefault(key, event.module)
            if len(claimed) > mark:  # (a call that ran nodes: the calls it made were found in the file)
                made_since.setdefault(key, start)
        if returned and (len(handed_back) < len(returned) or not results_of):
            # a result equal to what the call took: not bounded; where it is a new tensor, which of
            unbounded.add(event.module)  # two calls a node passing it on ran in is not settled
            if calls_of[event.module] == 1 and all(informative(array) for _, array in results_of):
                feeding_results[event.module] = ancestors(
                    [producer[name] for _, array in results_of for name in find(array)])
            # the nodes computing it from what the call took (passing that on, or reading it and holding its value:
            # a scale of ones): the returning call's, or its caller's; where no node is known to hold what the call
            # took yet, a later call may tell
            made_none = began_at[position] == position - 1  # no call began inside it
            if any(key != given_key for key, given_key in returned):
                remade_at.append(position)
            equal_after.extend((given_key, key, array, event.module, made_none) for key, given_key in returned
                               if key != given_key for taken, array in inputs if taken == given_key)
            continue
        holding = set(known.values()) if fresh else set()  # the nodes holding tensors met before (for fresh ones)
        bounding = tuple(value for value in results_of if value[0] not in made_before)
        undo = _undo_point([key for key, _ in (*bounding, *inputs)], known, runs_on, claimed) if owned else None
        region = _bound(bounding, inputs, (start, cursor), known, runs_on, find, producer, is_input, passes_through,
                        holding_one_number, copies, (claimed, mark), descends, descends_telling_nothing,
                        ended_inside, returned_later(position), folded, reads_beside,
                        sized_beside if not numbers and not any(
                            array.dtype.kind in "iub" for _, array in inputs) else lambda later, earlier, taken: False,
                        reads_untaken if not numbers and not any(  # (a call given a number or a model input
                            array.dtype.kind in "iu" and array.size <= 1 or is_input(array)  # may build such a
                            for _, array in inputs) else lambda later, earlier, taken: False,  # tensor itself)
                        model_given, bool(remade_at) and remade_at[-1] > began_at[position], made_later,
                        returned_by, several, weights, made_after(position, start), runs_inner(event.module),
                        repeats)
        if after is not None and calls_of[after] == 1:
            # a tensor it took met for the first time, held by one node alone (no earlier value equals it), was made
            # after the last call event: where that was the end of a call (of a module called once), after that call
            ran_after[after].update(
                holders[0] for key, array in inputs if key in fresh and informative(array) and not is_input(array)
                and len(holders := [producer[name] for name in find(array)]) == 1
                and holders[0] not in holding and holders[0] not in data_free)
        untold = [array for key, array in results_of if key not in known and not informative(array)]
        if region is not None and undo is not None and owned is not None \
                and _runs_anothers_weights(region, event.module, owned, ancestors, start, reads_telling_weight):
            undo()  # what it settled on the way is undone with it
            region = None
        if region is None:
            unbounded.add(event.module)
            continue
        if any(key not in known and informative(array) for key, array in bounding):
            unbounded.add(event.module)  # a result no node holds: the others pull nodes in, pushing none out
        if untold:
            # a result that tells nothing (a size it returned, a mask of ones) places no node: the nodes computing
            # it are unknown, so none is pushed out of the module on this call's account; its region pulls in.
            # Where every such result is one integer (a size), only integer arithmetic can have computed it: the
            # call's tensor results still bound the nodes computing anything else
            if all(array.size == 1 and array.dtype.kind in "iu" for array in untold):
                sized.add(event.module)
            else:
                unbounded.add(event.module)
        results, sources, unsure = region
        given_by |= set(sources)
        ended_holding = set(results)
        # an input of one number repeated that one node alone holds, or the first of several passing it on (see
        # `_bound`), bounded the call from below (a mask that masks nothing, zeros the caller built): the call began
        # once it existed, so it and what computed it ran before
        alone = [holders[0] for _, array in inputs if not informative(array)
                 and (holders := holding_one_number(array)) and holders[0] in sources
                 and holders[0] not in unsure]
        ran_before |= computed_before(alone, begun[-1][0] if begun else -1)
        for key, _ in results_of:  # passing its result on after the node that made it: the call's or its caller's
            inner = returned_by.get(key, event.module)
            # (after the region of the inner call, where it was bounded: the nodes holding the value before it may be
            # calls' made before it, equal at initial weights)
            made_at = max(bounded_at[inner].nodes, default=None) \
                if inner != event.module and is_ancestor(event.module, inner) and inner in bounded_at \
                and inner not in unbounded else None
            for node in runs_on.get(key, ()):
                handed_on[node].add(event.module)
                if made_at is not None and node > made_at:
                    returned_through[node] = (inner, event.module)
        # a tensor the call took that no call took or returned before was made after the last call event, before
        # the call began: where it holds an earlier tensor's value run on unchanged (a concatenation of one
        # tensor), the first node passing it on ran before the call
        made_then = {runs_on[key][0] for key, _ in inputs
                     if key in fresh and runs_on.get(key) and known.get(key) in holding}
        ran_before.update(made_then)
        timed |= made_then  # known to have run after the last call event: in the call running then
        cursor = max(cursor, *results)
        before = ancestors([i for i in sources if i not in unsure], start)
        reach = ancestors(results, start)
        # a call reads no size of a tensor it took no value of (where each value it took is a number, or held by a
        # node, none the model's input): a node measuring one, and what only such reads lead from to its results,
        # ran before it (sizes its caller measured and handed over as numbers)
        if all(not is_input(array) and (array.dtype.kind in "iub" and array.size <= 1 or informative(array)
                                        and find(array)) for _, array in inputs):
            handed_over = set(sources)
            unheld = {i for i in reach if i in sizing and graph.node[i].input
                      and (measured_node := producer.get(graph.node[i].input[0])) is not None
                      and untaken(measured_node, handed_over)}
            if unheld:
                measuring = reach
                reach = ancestors(set(results) - unheld, start, within=reach - unheld)
                ran_before |= measuring - reach - before - constant
        nodes = reach - before - constant
        # a result held by a node computed from constants alone (a table of positions at static sizes), after the
        # call began and from no value it took: the call made it, with the constants computed for it alone since
        # the last call result found before it began (of a module called once: equal constants of several calls
        # may be one node)
        fixed = {r for r in results if r in constant and r > start and r not in before and r not in unsure}
        if fixed and calls_of[event.module] == 1:
            pool = ancestors(fixed, start) & constant - before - unsure - fixed
            for i in sorted(_serving_only(pool, readers, fixed | nodes) | fixed):
                made_constant.setdefault(i, event.module)
        # an earlier call's result taken as it was (the same tensor): the nodes passing it on toward this call's
        # results ran between the two calls' ends, in one of them or in a caller between them
        for key, _ in inputs:
            if key not in fresh and key in returned_by and runs_on.get(key):
                for node in set(runs_on[key]) & reach:
                    if node in shaped_within:
                        continue
                    between.setdefault(node, (returned_by[key], event.module))
                    if graph.node[node].op_type in COPYING_OPS and carries(node, key):
                        carried.add(node)  # a copy of the value: a cast to the type it has, a view
        # ran in the call or in its caller (neither pulled in nor pushed out of the call): a value passed on
        # unchanged and what shaped it (a view's sizes); integers computed from the model's inputs alone; in a
        # call given numbers, the integer arithmetic giving numbers equal to them
        doubtful = ancestors([i for i in sources if i in unsure], start) - before - constant
        # but not a node the region of a call it made holds (the regions bounded since it began are those of the
        # calls it made): that call ran within this one, so the node ran in it, whatever ran on after it (a mask
        # combined with a mask a child computed that masks nothing equals the mask the call took); nor a node its
        # results were computed from that computed from such a node: it ran after that call began, before this
        # one ended. (Not a cast of what that call took that it ran: that places it for the tensor that call took,
        # settled below for this one)
        if doubtful:
            within = set().union(*(inner.nodes for inner in regions[regions_before[began_at[position]]:])) \
                - cast_in.keys()
            doubtful -= within | computed_from(within, doubtful & reach)
        # but a value the call took, cast to the type it has by a node only the call's nodes read: code casts a
        # value where it computes with it (a norm computing in float32), so the call ran it. Where an earlier call
        # returned that tensor, it may have cast it as it returned it (the graph and the values are the same
        # either way): then only where the call's own nodes compute with the cast (none in a call it made, which
        # may have been handed what the earlier call cast, and none passing the value on: a scale of ones), and
        # not where the two calls lie in two elements of one list of layers (a tag in a sibling layer is the
        # defect tags exist to end: ``carried`` settles those). Readers written after the call's results do not
        # count against it: a cast to the type it has returns the very tensor it was given, so a trace records
        # every later read of that tensor (the caller adding it back as a residual) as a read of the cast
        last = max(results)
        own_nodes = {r for r in nodes if r in results or r not in ended_inside and claimed.get(r, -1) < mark}
        computes_with = {key: nodes if key in fresh else own_nodes - set(runs_on.get(key, ())) for key, _ in inputs}
        cast_here = {node for key, _ in inputs for node in runs_on.get(key, ())
                     if node in nodes and casts_as_it_is(node, key)
                     and (key in fresh or not in_sibling_elements(returned_by.get(key, ""), event.module))
                     and any(r in nodes for r in readers.get(node, ()))
                     and all(r in computes_with[key] or r not in nodes and r > last for r in readers.get(node, ()))}
        # (and a cast a call it made ran of the very tensor this call took, it ran too: of another tensor, equal to
        # it, that call's claim does not settle this one's)
        taken_keys = {key for key, _ in inputs}
        doubtful -= cast_here | {node for node, (at, key) in cast_in.items()
                                 if at > began_at[position] and key in taken_keys}
        cast_in.update({node: (position, key) for key, _ in inputs for node in runs_on.get(key, ()) if node in cast_here})
        read_later.update({node: (event.module, {r for r in readers[node] if r not in nodes}) for node in cast_here})
        # a call casting what it took to the type it has casts its result back as it returns it (unless the call
        # taking that result computes with the cast: ``cast_in``, which settles it); not a result a call it made
        # returned to it (attention weights a layer hands on from its attention): that call made it
        if cast_here:
            for key, _ in results_of:
                if returned_by.get(key) == event.module and (chain := runs_on.get(key)) \
                        and casts_as_it_is(chain[0], key):
                    cast_back.setdefault(chain[0], event.module)
                    cast_of.setdefault(chain[0], key)
        # a tensor an earlier call returned, cast to the type it has by the first node passing it on, whose elements
        # only calls this one made read: this call does not compute with the cast, and the calls it made may have been
        # handed what was cast before. Code casts a value where it computes with it: the earlier call computed it
        # and cast it as it returned it (a norm computing in float32 casting back to the type it was given). Not
        # where the two calls lie in two elements of one list of layers (``carried`` settles those)
        for key, _ in inputs:
            returning = returned_by.get(key)
            chain = runs_on.get(key, [])
            if key in fresh or returning is None or not chain or in_sibling_elements(returning, event.module):
                continue
            first = chain[0]
            computing = [r for r in readers.get(first, ()) if r not in sizing]  # reading its elements, not its sizes
            if first in nodes and casts_as_it_is(first, key) and computing \
                    and all(r in nodes and r not in computes_with[key] for r in computing):
                cast_back.setdefault(first, returning)
                cast_of.setdefault(first, key)
        if numbers:
            doubtful |= _giving_numbers(nodes, numbers, graph, producer, values, integer)
        # the numbers it took (sizes, also as tensors of one integer: an exporter's trace makes them tensors)
        # existed before it began: the nodes giving them written before its first other node, computed from no
        # value it took (it may read its own input's sizes itself) and passing on no number they read (a cast of
        # it: the call's), were computed before it and handed in
        took = numbers + tuple(float(array.reshape(-1)[0]) for _, array in inputs
                                if array.size == 1 and array.dtype.kind in "iu")
        giving = _giving_numbers(nodes, took, graph, producer, values, integer) if took else set()
        handed: set[int] = set()
        # (with what they were computed from, in the region, that is computed from nothing the call took: the
        # floats a count of positions was summed from)
        feeding: set[int] = set()
        listed: set[int] = set()  # a value holding the numbers handed, in order (counts handed over as a list),
        if len(numbers) > 1:  # and what the region took from it of those numbers (each count): they gave them
            handed_numbers = set(numbers)
            for i in sorted(nodes & integer):
                counted = values.get(graph.node[i].output[0])
                if i in giving or counted is None:
                    continue
                if counted.size == len(numbers) and [float(v) for v in counted.reshape(-1)] == list(numbers) \
                        or any(j in listed for j in made_from[i]) and 0 < counted.size <= len(numbers) \
                        and all(float(v) in handed_numbers for v in counted.reshape(-1)):
                    listed.add(i)
        if giving or listed:
            from_taken = computed_from(set(sources), nodes)
            feeding = ancestors(giving | listed, start) & nodes - giving - listed - from_taken
        if nodes - giving - listed - feeding - doubtful:
            first_other = min(nodes - giving - listed - feeding - doubtful)
            handed = {i for i in giving if i < first_other and not measured(i) & set(sources)
                      and not any(_same_elements(values, graph.node[producer[name]], graph.node[i])
                                  for name in graph.node[i].input if name in producer)}
            # (those written before the last node holding a tensor it took: one written after may be the call's
            # own, taking the number again from what it was handed)
            taken_last = max((i for i in sources if i not in unsure), default=first_other)
            handed |= {i for i in listed if i < min(first_other, taken_last) and i not in from_taken}
            for i in sorted(feeding, reverse=True):
                if i < first_other and any(j in handed for j in readers[i]):
                    handed.add(i)
            ran_before |= handed
            doubtful |= handed
        for node in doubtful - of_inputs:
            undecided[node].add(event.module)
        # sizes computed from a number handed to the call and read within it alone ran after it was handed: in the
        # call (a caller computing them would hand them over instead), which its callers do not unsettle
        own_sizes = {i for i in nodes & of_inputs if i not in handed and handed & ancestors([i], start)
                     and all(reader in nodes for reader in readers[i])}
        # so did integers it computed from the elements (not the sizes) of a model input it took itself, read
        # within it alone (positions counted from token ids): a caller computing them would hand them over instead
        if any(is_input(array) for _, array in inputs):
            from_elements: set[int] = set()
            for i in sorted(nodes & of_inputs):
                if (i not in sizing and any(name in graph_inputs for name in graph.node[i].input)) \
                        or any(j in from_elements for j in made_from[i]):
                    from_elements.add(i)
            own_sizes |= {i for i in from_elements if all(reader in nodes for reader in readers[i])}
        sized_in |= own_sizes
        doubtful |= nodes & of_inputs - own_sizes
        # where they ran is not settled at all: integer arithmetic written before the call began that it read
        # other than through its inputs (an exporter moves size computations up, merged with an earlier equal
        # one), and nodes whose value is read outside the region other than through its results (a
        # computation the exporter merged)
        frontier = {producer[name] for i in nodes for name in graph.node[i].input
                    if name in producer and producer[name] <= start and producer[name] in integer} - constant
        early = ancestors(frontier - set(sources), within=integer) - constant
        if early:
            early -= ancestors(sources)
        # the nodes reading weights, and what the region computed from them: no caller made it first
        reading_weights = nodes & weighted
        own = reading_weights | computed_from(reading_weights, nodes)
        kept = _kept_inside(nodes, results, readers, producer, graph, own)
        shared = nodes - kept - doubtful
        loose |= shared
        moved_up |= early
        kept -= doubtful
        # of those, the integers (sizes) written before every node the call kept ran before it began: an exporter
        # writes nodes in the order they ran and merges a later equal read into the first, and a forward reads the
        # sizes it needs as it begins, before the calls it makes, so a caller's read of a size it shares with a call
        # came first (a caller reading a size of what it hands the call, the call reading it again). Not in a call
        # returning a size: the size read outside may be the one it returned
        if kept and shared and event.module not in sized:
            first_kept = min(kept)
            ran_before |= {i for i in shared if i < first_kept and i in integer}
        # a node passing a result on unchanged may be the call's last (a zero added): so may the values it computed
        # from beside the result (not sizes, read where they are used), after the call began and from nothing it
        # took, and what they were computed from
        passing = unsure - set(sources)
        beside_values = {producer[name] for i in passing for name in graph.node[i].input if name in producer} \
            - integer - passing - nodes
        beside = ancestors(beside_values, start) - before - constant - nodes - doubtful if beside_values else set()
        # integer arithmetic the region holds that reads sizes of what the call took, and sizes read so: a call
        # reads its own input's sizes (though a call it made read them too, written before that call began)
        for i in sorted(kept & integer):
            if any(j in sources or j in sized_own for j in made_from[i]) \
                    and all(j in sources or j in sized_own or j in constant for j in made_from[i]):
                sized_own.add(i)
        span = (min(kept, default=start), max(results))
        began = max((i for i in sources if i not in unsure), default=None)
        regions.append(CallRegion(event.module, kept, unsure | (nodes - kept) | early | beside, span,
                                  began if began is not None and began < span[0] else None))
        for key, _ in inputs:
            bounded_taking[key].append(regions[-1])
        bounded_at[event.module] = regions[-1]
        first_result.append((began_at[position], min(results)))
        last_result.append((position, max(results)))
        # the nodes passing its result on, shaped by sizes of a value it made (not from its results alone), ran in
        # it: what a call made and did not return no later code reads. Not in an element of a list of layers: the
        # next element may have computed the size again, and the exporter merged that with the first one's node
        passed_on = [(key, runs_on[key]) for key, _ in results_of if runs_on.get(key) and key not in looked_at
                     and returned_by.get(key) == event.module]
        if passed_on and not in_list_element(event.module):
            from_results = set(results)  # what it computed from its results alone (their sizes) a caller may too
            for i in sorted(nodes):
                if (producers := [j for j in made_from[i] if j not in constant]) \
                        and all(j in from_results for j in producers) \
                        and not any(name in graph_inputs for name in graph.node[i].input):
                    from_results.add(i)
            for key, chain in passed_on:
                looked_at.add(key)
                for node in _shaped_by(chain, nodes - from_results, nodes, made_from, readers, integer):
                    shaped_within[node] = event.module
        ended_inside |= kept - set(results)
        if kept:
            ended_spans.append((min(kept), max(results)))
        unplaced |= doubtful - sized_in
        if begun:
            # a new tensor the call took that its caller was not handed (no tensor the caller took equals it, in
            # shape and values; not a weight, not a model input) was made by the caller's own code, after the
            # caller began (a view of what it took, whose tensor an exporter may not hold: a transpose the callee
            # before it ended with, cancelled against the one the caller began with): of the nodes holding it, the
            # last written before the call's first node, left open between this call and its caller, ran in the
            # caller
            caller_took, caller = begun[-1][1], begun[-1][6]
            first_node = min(nodes - unplaced, default=-1)
            for key, array in inputs:
                if key in fresh and key not in weights and informative(array) and not is_input(array) \
                        and not any(equal_tensors(array, other) for _, other in caller_took) \
                        and (last := max((h for h in (producer[name] for name in find(array)) if h < first_node),
                                         default=-1)) in unplaced:
                    made_in[last] = caller
    made_by: dict[int, str] = {}  # nodes a call that made no call ran, returning a new tensor equal to what it took
    holding_values = Counter(known.values())

    def reads_alone(node: int, before: int) -> bool:
        """Whether ``node`` reads nothing but what ``before`` made, literal constants and weights (no value computed
        for it after ``before``, from constants or not)."""
        return all(name not in producer or (j := producer[name]) == before or graph.node[j].op_type == "Constant"
                   or j < before and j in data_free for name in graph.node[node].input if name)

    running_on = {i for chain in runs_on.values() for i in chain}
    # weights: initializers of many floats, and the copies of one the exporter wrote for each parameter equal to it
    weight_names = {name for name, size in sizes.items() if size > 1}
    weight_names |= {node.output[0] for node in graph.node
                     if node.op_type == "Identity" and node.input[0] in weight_names}

    def reads_weights(node: int) -> bool:
        """Whether ``node`` reads a weight (``weight_names``)."""
        return any(name in weight_names for name in graph.node[node].input)
    # a call that made no call and returned a new tensor computed it itself (a pooling of a single position, a norm
    # at its initial statistics), and so did each such call taking what the one before returned: where as many
    # nodes as those calls, written after the node holding what the first took, each computed from the one before,
    # hold their results (and no other value a call took or returned), each ran one of them in the order they ran,
    # with the nodes computing it from the one before
    leaves = [n for n, entry in enumerate(equal_after) if entry[4] and informative(entry[2])]
    taking = {equal_after[n][0]: n for n in reversed(leaves)}  # the first such call taking each tensor
    returned_new = {equal_after[n][1] for n in leaves}
    placed: set[int] = set()  # the entries so settled (by position in ``equal_after``)
    for head in leaves:
        if equal_after[head][0] in returned_new:
            continue  # not the first of a run of such calls
        run = [head]
        while (following := taking.get(equal_after[run[-1]][1])) is not None and following not in run:
            run.append(following)
        found = [find(equal_after[n][2]) for n in run]
        given = equal_after[head][0]
        if not found[0]:
            continue
        # (a tensor met for the first time: the first node equal to it holding no tensor met before)
        first = known[given] if given in known else min(
            [i for name in found[0] if (i := producer[name]) not in holding_values] or [-1])
        if first < 0:
            continue
        results_known = [known.get(equal_after[n][1]) for n in run]
        holding_it = {producer[name] for names in found for name in names} | {i for i in results_known if i is not None}
        # (not a cast to the type it has: in PyTorch that returns the very tensor it casts, never a new one)
        making_it = sorted(i for i in holding_it if i > first and descends(i, first)
                           and graph.node[i].op_type not in CASTS)
        if len(making_it) != len(run) or not all(descends(later, earlier)
                                                 for earlier, later in zip(making_it, making_it[1:])):
            continue
        if not all((at is None or at in (first, *making_it)) and holding_values[node] <= (at == node)
                   for at, node in zip(results_known, making_it)):
            continue
        # (from the last node passing on what the first took that the first of them is computed from)
        start_at = max(i for i in holding_it | {first} if first <= i < making_it[0] and descends(making_it[0], i))
        spans = [(n, {i for i in ancestors([node], before) if descends(i, before)} - constant, before)
                 for n, node, before in zip(run, making_it, [start_at, *making_it])]
        # (a tensor is made before a call takes it, but a call taking the result may compute an equal one from it:
        # where the region of a call taking a result holds a node computing it, that call ran it; where it may hold
        # one that computes no call's value or reads a value computed since what the first took was made, and none
        # of the nodes reads weights (which would be the first call's parameters), that call may have run it - an
        # activation of faded values equal to what it took, a padding of nothing by amounts its code computed. A
        # node computing it from what the call took, literal constants and weights alone is the call's: a pooling)
        taken_on = [(ran, before, took)
                    for n, ran, before in spans for took in bounded_taking.get(equal_after[n][1], ())]
        ran_by_taker = any(i in took.nodes for ran, _, took in taken_on for i in ran)
        maybe_by_taker = not any(reads_weights(i) for _, ran, _ in spans for i in ran) and any(
            i in took.unsure and (i not in making_it and i not in holding_values and i not in running_on
                                  or not reads_alone(i, before)) for ran, before, took in taken_on for i in ran)
        if ran_by_taker or maybe_by_taker:
            continue
        # (a call computes from what it took, weights and constants alone: where a node making it read another value
        # made before, that node is another's, computing what the call returned again: a norm folded into the layer
        # before it runs no node, and a residual add of a branch returning zeros holds its value)
        if any(name in producer and (j := producer[name]) not in ran and j != before and j not in data_free
               for _, ran, before in spans for i in ran for name in graph.node[i].input if name):
            continue
        for n, ran, _ in spans:
            regions.append(CallRegion(equal_after[n][3], ran))
            made_by.update(dict.fromkeys(ran, equal_after[n][3]))
            placed.add(n)
    # a node so placed that the values left open between a call and its caller ran in that call, which made the
    # call running it (an activation the caller's region took for what it was handed, run on unchanged)
    for node, module in made_by.items():
        if node in unplaced and undecided[node] and all(is_ancestor(e, module) for e in undecided[node]):
            unplaced.discard(node)
            del undecided[node]
    for n, (given_key, _, array, module, _) in enumerate(equal_after):
        if n in placed:
            continue
        if given_key not in known:
            continue
        held = (known[given_key], *runs_on.get(given_key, ()))
        equal = set(find(array)) if informative(array) else set()
        passing = {*held[1:], *(reader for i in held for reader in readers.get(i, ())
                                if any(name in equal for name in graph.node[reader].output))}
        for node in passing:
            if is_ancestor(module, made_by.get(node, "")) and made_by[node] != module:
                continue  # a call it made ran it
            unplaced.add(node)
            undecided[node].add(module)
            handed_on[node].add(module)
    excluded: dict[str, set[int]] = {}
    for module, nodes in calls_before:  # the nodes every call of a module ran after
        excluded[module] = nodes if module not in excluded else excluded[module] & nodes
    for module, nodes in excluded.items():  # and what computed them from weights, constants and sizes alone (back
        # to the first of them: the sizes a mask built at fixed sizes was expanded to) ran before them; not their
        # data, which the values the calls took bound (where a value matched wrongly, it would carry the error on)
        excluded[module] = ancestors(nodes, min(nodes) - 1, within=data_free) if nodes else nodes
    served = _served(of_inputs, readers)
    # the graph inputs each size measures, where it measures nothing else: its shape reads read graph inputs or
    # integers measuring them alone, and it reads no element of a graph input
    measures: dict[int, frozenset[str]] = {}
    for i in sorted(of_inputs):
        node = graph.node[i]
        if i in sizing:  # the sizes of a graph input, or of integers measuring graph inputs alone
            read = [name for name in node.input if name]
            if all(name in graph_inputs or producer.get(name) in measures for name in read):
                measures[i] = frozenset({name for name in read if name in graph_inputs}).union(
                    *(measures[producer[name]] for name in read if name in producer))
        elif not any(name in graph_inputs for name in node.input) \
                and all(j in measures or j in constant for j in made_from[i]) and any(j in measures for j in made_from[i]):
            measures[i] = frozenset().union(*(measures[j] for j in made_from[i] if j in measures))
    measured_by = {i: modules for i, names in measures.items()
                   if i in served and (modules := sorted({module for module, start, names_taken in taking_inputs
                                          if start < i and names <= names_taken and i not in given_by
                                          and i not in excluded.get(module, ())}))}
    # a crop taking the whole of a value it reads, with the node making that value
    read_by: dict[str, int] = Counter(name for node in graph.node for name in node.input)
    crops = {i: producer[node.input[0]] for i, node in enumerate(graph.node)
             if node.op_type == "Slice" and node.input[0] in producer and read_by[node.input[0]] == 1
             and (whole := values.get(node.input[0])) is not None and (part := values.get(node.output[0])) is not None
             and whole.shape == part.shape and np.array_equal(whole, part)}
    # integer arithmetic turning numbers into the operand of one node alone (a list of sizes made a tensor: each
    # number unsqueezed, then concatenated): written where that operand is used. So are the sizes it reads of a
    # value held outside every call (one a call took or returned, the model's input) or of its own integers: its
    # code holds that value. Sizes read off a value made inside a call may be that call's own (returned by it)
    call_values = {*known.values(), *(i for nodes in runs_on.values() for i in nodes)}  # nodes holding calls' values
    listing: set[int] = set()
    for i in sorted(integer - constant):
        if i in sizing:
            if all(name in graph_inputs or name in producer and (producer[name] in call_values or producer[name] in listing)
                   for name in graph.node[i].input if name):
                listing.add(i)
        elif not any(j in sizing and j not in listing for j in made_from[i]):
            listing.add(i)
    # (not a node that may hold a value a call took: that was made before the call began, not where it is used)
    built_for = {i: sorted(nodes) for i, nodes in _served(listing - given_by, readers).items()
                 if len(nodes) == 1 and not nodes & integer}
    loose |= moved_up - sized_own
    regions_holding: dict[int, list[str]] = defaultdict(list)
    for call_region in regions:
        for i in call_region.nodes:
            regions_holding[i].append(call_region.module)
    for i in list(cast_back):
        # a call taking that very tensor and computing with its cast settles where the cast ran, over the call
        # returning the tensor: but not where a later read counted for it lies in another call, which may have been
        # handed the tensor too (two layers reading the output of one norm: the norm cast it)
        same_tensor = cast_in.get(i, (0, None))[1] == cast_of[i]
        claimed_by, later = read_later.get(i, ("", set()))
        read_elsewhere = any(not is_ancestor(other, claimed_by) for r in later for other in regions_holding.get(r, ()))
        # and never into an element of a list of layers beside the one taking the result (``carried`` settles those)
        if same_tensor and not read_elsewhere or i in between and in_sibling_elements(*between[i]):
            del cast_back[i]
    for node, (_, outer) in list(returned_through.items()):  # the outer calls computed with it: theirs
        if any(reader in region.nodes
               for region in regions if region.module == outer for reader in readers.get(node, ())):
            del returned_through[node]
    # a module called once ran nothing written from the first result of a call that began after it ended
    ended_before: dict[str, int] = {}
    first_result.sort()
    starts = [at for at, _ in first_result]
    earliest = [node for _, node in first_result]  # from each call on: the first result of any call beginning later
    for k in range(len(earliest) - 2, -1, -1):
        earliest[k] = min(earliest[k], earliest[k + 1])
    for position in began_at:
        k = bisect_right(starts, position)
        if calls_of[events[position].module] == 1 and k < len(earliest):
            ended_before[events[position].module] = earliest[k]
    # and nothing written up to the last result of a call that ended before it began
    began_after: dict[str, int] = {}
    last_result.sort()
    ended_at = [at for at, _ in last_result]
    latest = [node for _, node in last_result]  # up to each call: the last result of any call ending earlier
    for k in range(1, len(latest)):
        latest[k] = max(latest[k], latest[k - 1])
    for position in began_at.values():
        k = bisect_left(ended_at, position)
        if calls_of[events[position].module] == 1 and k:
            began_after[events[position].module] = latest[k - 1]
    _beside_results(graph, values, events, began_at, readers, constant, ran_after, ended_before)

    def ran_in_returning(node: int, key: Hashable) -> bool:
        """Whether a node reads a weight equal to a parameter of the module whose call returned ``key`` (or of one
        within it): it ran in that call, which returned the tensor after it."""
        returning = returned_by.get(key)
        return returning is not None and any(is_ancestor(returning, module) for module in (weighing or {}).get(node, ()))

    return Boundaries(regions, unbounded, loose, unplaced,
                      {node: modules for node, modules in undecided.items() if node not in of_inputs},
                      {event.module for event in events} - _emptied(events, values),
                      {module: nodes for module, nodes in excluded.items() if nodes},
                      {i: sorted(nodes) for i, nodes in served.items() if nodes}, between, carried - timed,
                      dict(ran_after), call_values,
                      dict(handed_on), shaped_within, sized, integer, built_for, crops, made_constant, cast_back,
                      returned_through, ended_before, feeding_results, measured_by,
                      {module: {i for key in keys if key in known for i in (known[key], *runs_on.get(key, ()))
                                if i == known[key] or i not in weighted or ran_in_returning(i, key)}
                       for module, keys in took_keys.items()}, made_in, began_after)


def _beside_results(graph: "onnx.GraphProto", values: dict[str, "np.ndarray"], events: list[Event],
                    began_at: Mapping[int, int], readers: Mapping[int, list[int]], constant: set[int],
                    ran_after: dict[str, set[int]], ended_before: Mapping[str, int]) -> None:
    """Add to ``ran_after`` (each module called once: nodes that ran after its call ended) the nodes every reader of
    which ran after that call ended (such a node, or one written from ``ended_before`` on) and whose values have the
    shape and type of no tensor that call returned.

    A call hands on nothing but its results, so a node whose value is read only after the call ended either holds a
    result or ran outside the call (an index its caller reshaped for a gather of what the call returned). Where the
    results are not found by value (an index sorted among ties, which two runtimes order apart), their shapes and
    types still tell. Integers and flags of at most one axis count as results: a call may return numbers that are not
    tensors (a list of counts), which the hooks do not see and the file holds as scalars or a shape.
    """
    for module, after in ran_after.items():
        returned = {(array.shape, array.dtype.str) for end in began_at if events[end].module == module
                    for _, array in events[end].values}
        later = ended_before.get(module, len(graph.node))
        for i in range(min(max(after, default=-1), later) - 1, -1, -1):
            if i in after or i in constant or not readers.get(i) \
                    or not all(r in after or r >= later for r in readers[i]):
                continue
            outputs = [values.get(name) for name in graph.node[i].output if name]
            if outputs and all(value is not None and hasattr(value, "dtype")
                               and (value.shape, value.dtype.str) not in returned
                               and not (value.dtype.kind in "iub" and value.ndim <= 1) for value in outputs):
                after.add(i)


def _emptied(events: list[Event], values: dict[str, "np.ndarray"]) -> set[str]:
    """The modules every call of which returned tensors of no element alone, of shapes no node output of the
    graph has, and the modules below them: data leaves a call through its results, so a graph where no node holds
    them (the exporter dropped what computed them) holds no node that ran in such a call. (Where a node does, the
    graph kept the call's nodes computing nothing: an update of no rows.)"""
    held = {value.shape for value in values.values() if getattr(value, "size", None) == 0}
    ends: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        if not event.begins:
            ends[event.module].append(event)
    empty = {module for module, found in ends.items()
             if all(event.values and all(array.size == 0 and array.shape not in held for _, array in event.values)
                    for event in found)}
    return {module for module in ends if any(module == e or module.startswith(e + ".") for e in empty)}


def _numbers_in(value: Any) -> Iterator[float]:
    """The numbers in a call's arguments that are not tensors (nor flags), through tuples, lists and dicts."""
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _numbers_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers_in(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def _same_elements(values: dict[str, "np.ndarray"], earlier: "onnx.NodeProto", later: "onnx.NodeProto") -> bool:
    """Whether ``later``'s first output holds the elements of ``earlier``'s first output, in order."""
    import numpy as np

    a, b = values.get(earlier.output[0]), values.get(later.output[0])
    return a is not None and b is not None and a.size == b.size and bool(np.array_equal(a.reshape(-1), b.reshape(-1)))


def _giving_numbers(nodes: set[int], numbers: tuple[float, ...], graph: "onnx.GraphProto",
                    producer: dict[str, int], values: dict[str, "np.ndarray"], integer: set[int]) -> set[int]:
    """The integer arithmetic of ``nodes`` (:func:`_size_arithmetic`) giving a value every element of which is
    one of ``numbers`` (a size, or the sizes of a shape, handed over), and the arithmetic it is computed from."""
    arithmetic = _size_arithmetic(nodes, graph, producer, integer)
    given = set(numbers)
    giving = [i for i in arithmetic for name in graph.node[i].output
              if 0 < getattr(values.get(name), "size", 0) <= len(numbers)
              and all(float(v) in given for v in values[name].reshape(-1))]
    found: set[int] = set()
    stack = giving
    while stack:
        i = stack.pop()
        if i not in found:
            found.add(i)
            stack.extend(j for name in graph.node[i].input if name in producer and (j := producer[name]) in arithmetic)
    return found


def _size_arithmetic(nodes: set[int], graph: "onnx.GraphProto", producer: dict[str, int], integer: set[int],
                     closed: bool = False) -> set[int]:
    """The nodes of ``nodes`` computing integers from integers of ``nodes`` alone, or from values outside
    them (``closed``: from graph inputs and ``nodes`` alone): in a call that took numbers, such nodes may have
    computed those numbers for the caller."""
    pure: set[int] = set()
    for i in sorted(nodes):
        if i in integer and all(producer[name] in pure for name in graph.node[i].input
                                if name in producer and (closed or producer[name] in nodes)):
            pure.add(i)
    return pure


def _kept_inside(nodes: set[int], results: list[int], readers: dict[int, list[int]], producer: dict[str, int],
                 graph: "onnx.GraphProto", own: "set[int] | frozenset[int]" = frozenset()) -> set[int]:
    """``nodes`` less those whose value is read outside them other than through the call's results: such a
    value was made outside the call and shared with it (the exporter merges equal computations, as the reads
    of one tensor's size in a caller and in the call, into the first). Not those of ``own``, computed from
    weights the call read: no code before the call made them, and an equal value computed later was merged
    into the call's node, the first (a layout change after the call that cancels one inside it: the later
    code reads the value from before the call's own)."""
    ends = set(results)
    lowest = min(ends)
    downstream: dict[int, bool] = {}

    def after_results(reader: int) -> bool:  # whether ``reader`` computes from one of the results
        if reader not in downstream:
            seen, stack, found = set(), [reader], False
            while stack and not found:
                i = stack.pop()
                if i in ends:
                    found = True
                elif i not in seen and i > lowest:
                    seen.add(i)
                    stack.extend(producer[name] for name in graph.node[i].input if name in producer)
            downstream[reader] = found
        return downstream[reader]

    kept = set(nodes)
    changed = True
    while changed:
        changed = False
        for i in sorted(kept, reverse=True):
            if i not in ends and i not in own \
                    and any(r not in kept and not after_results(r) for r in readers.get(i, ())):
                kept.discard(i)
                changed = True
    return kept


def _shaped_by(passing: list[int], made: set[int], region: set[int], made_from: list[list[int]],
               readers: dict[int, list[int]], integer: set[int]) -> set[int]:
    """Of ``passing`` (the nodes passing a call's result on, in order), those up to the last one that reads sizes
    computed, through integer arithmetic outside the call's ``region``, from a value the call ``made`` (a gather
    index it computed), with that arithmetic where it serves them alone: they ran in the call."""
    last, feeds = -1, set()
    for place, node in enumerate(passing):
        feed: set[int] = set()
        witness = False
        stack = [j for j in made_from[node] if j in integer and j not in passing]
        while stack:
            j = stack.pop()
            if j in region:
                witness = witness or j in made
            elif j not in feed:
                feed.add(j)
                stack.extend(k for k in made_from[j] if k in integer)
        if witness:
            last = place
        feeds |= feed
    if last < 0:
        return set()
    chain = set(passing[:last + 1])
    return chain | _serving_only(feeds, readers, chain)


def _made_within(inputs: tuple[Value, ...], fresh: set[Hashable], floor: int, find: Callable[["np.ndarray"], list[str]],
                 producer: dict[str, int], is_input: Callable[["np.ndarray"], bool],
                 copies: Callable[[list[int]], bool], descends: Callable[[int, int], bool],
                 holding_empty: Callable[["np.ndarray"], list[int]]) -> list[int]:
    """The nodes holding the new tensors a call takes (``fresh``: no call took or returned them before), each
    the first node equal to one, written after ``floor`` (every node holding a tensor met before), where every
    other node equal to it is computed from it (it passed the value on: a norm at its initial statistics). A tensor
    of no element is equal to every other of its shape and type (``holding_empty``: the nodes holding those); those
    written before ``floor`` hold tensors made before the caller began, not this new one."""
    made = []
    for key, array in inputs:
        if key not in fresh or is_input(array):
            continue
        if array.size == 0:  # (those before ``floor`` hold other tensors)
            holders = [i for i in holding_empty(array) if i > floor]
        elif informative(array):
            holders = sorted(producer[name] for name in find(array))
        else:
            continue
        if holders and holders[0] > floor and not copies(holders) \
                and all(descends(later, holders[0]) for later in holders[1:]):
            made.append(holders[0])
    return made


def _made_after(inputs: tuple[Value, ...], fresh: set[Hashable], ended_holding: set[int], holding: set[int],
                find: Callable[["np.ndarray"], list[str]], producer: dict[str, int],
                is_input: Callable[["np.ndarray"], bool], passes_on: Callable[..., bool],
                data_free: set[int]) -> set[int]:
    """The nodes a call about to begin shows ran after the call that ended last: for each tensor it takes that no
    call took or returned before, equal to a result of the call that ended (``ended_holding`` holds them: the
    first node holding the value) and held by several nodes passing that value on, the last of them. The tensor
    is another than the result (a scale by one the caller wrote, ``gamma * x`` with ``gamma = 1.0``) and was made
    from it or after it, so by a node after the first; every node after that one ran after the call ended, the
    last at least. ``holding``: nodes known to hold other tensors (those stay where their tensor places them)."""
    made: set[int] = set()
    for key, array in inputs:
        if key not in fresh or not informative(array) or is_input(array):
            continue
        holders = sorted(producer[name] for name in find(array))
        if len(holders) > 1 and holders[0] in ended_holding and holders[-1] not in holding \
                and holders[-1] not in data_free \
                and all(passes_on(later, earlier) for earlier, later in zip(holders, holders[1:])):
            made.add(holders[-1])
    return made


def _bound(outputs: tuple[Value, ...], inputs: tuple[Value, ...], span: tuple[int, int], known: dict[Hashable, int],
           runs_on: dict[Hashable, list[int]], find: Callable[["np.ndarray"], list[str]], producer: dict[str, int],
           is_input: Callable[["np.ndarray"], bool], passes_on: Callable[..., bool],
           holding_one_number: Callable[["np.ndarray"], list[int]], copies: Callable[[list[int]], bool],
           claims: tuple[dict[int, int], int],
           descends: Callable[[int, int], bool], descends_telling_nothing: Callable[[int, int], bool],
           inside_ended: "set[int] | frozenset[int]" = frozenset(),
           returned_later: Callable[[Hashable, "np.ndarray"], int] = lambda key, array: 0,
           folded: Callable[["np.ndarray"], bool] = lambda array: False,
           reads_beside: Callable[[int, int], bool] = lambda later, earlier: False,
           sized_beside: Callable[[int, int, set[int]], bool] = lambda later, earlier, taken: False,
           reads_untaken: Callable[[int, int, set[int]], bool] = lambda later, earlier, taken: False,
           given: "set[Hashable] | frozenset[Hashable]" = frozenset(), remade_inside: bool = False,
           made_later: Callable[[Hashable, list[int]], bool] = lambda key, holders: False,
           returned: "set[Hashable] | frozenset[Hashable] | Mapping[Hashable, str]" = frozenset(),
           several: "set[int] | frozenset[int]" = frozenset(),
           weights: "set[Hashable] | frozenset[Hashable]" = frozenset(),
           made_after: Callable[[], int | None] = lambda: None,
           runs_inner: Callable[[int, Hashable], bool] = lambda node, key: False,
           repeats: Callable[[int, int], bool] = lambda later, earlier: False,
           ) -> tuple[list[int], list[int], set[int]] | None:
    """One call's result nodes, the nodes its inputs came from and its unsure nodes; None where a value tells
    nothing (but a result of one number repeated may be held, see ``uniform_holder``), is not found (but an input
    of integers, which compare exactly: no node holds it, so it places none), has faded (an input), or (an input)
    equals several values written before the call's result, none passing the first on and not all ``copies`` of
    data (which place no node).

    ``span``: the last call result found before the call began, and before it ended (the results of the calls
    it made): its own results are written after the first, and after the second where such a node holds them.
    ``claims``: the nodes holding calls' results (and nodes passing them on), each with the number claimed
    before it, and that number when this call began: a node claimed by a call that ended before it began holds
    no new result of it. Of several nodes equal to a result, the first is taken where every other is computed
    from it (a later call's value, as a block scaled near zero returns), or where ``returned_later`` (how many
    other tensors equal to a result the calls begun after this one ended returned) counts at least as many as
    the others not computed from it, and where it is no result of a call made inside (a norm at its initial
    statistics returns a new tensor equal to its child's result); else the call is not bounded. But where the first
    is such a result and every other is computed from it, the call's own code made its result from that one after
    the inner call returned: the first of the others not passing the inner result on holds it (a mask of ones
    multiplied into a child's result), and the nodes passing the inner result on before it are unsure; not where
    a call it made returned a new tensor equal to what it took (``remade_inside``: a norm at its initial
    statistics, folded by the exporter into the layer before it, made one that no node of its own holds).
    ``inside_ended``: the nodes inside calls that ended (not their results); an input is
    held by none of them where another node holds it (a tensor an earlier call made and did not return is no
    later call's input: an equal value was computed again for it); nor, where the nodes holding it are not one
    value run on, is a tensor met for the first time held by a node holding a tensor met before (a slice of a
    concatenation giving back a layer's result is a new tensor, held where it was cut out). ``folded``: whether an initializer holds an
    input no node holds (computed from constants, written by the exporter as a weight): it was there before
    anything ran, so it bounds nothing and the call's other values bound it. Of the nodes running an input on
    unchanged, one that also reads floats computed from the model's inputs and not from the value (``reads_beside``)
    ran before a call that took that one tensor, and so did those before it: such a call computes from what it
    took, its own weights and constants alone (a mask of ones the caller multiplied in before handing the value on).
    So did one reading sizes of a value the caller made that the call took none of (``sized_beside``, given the
    nodes holding what the call took): a call given no numbers reads no size of a tensor it was not handed (the
    caller's windows of a padded layer input, cut by the sizes of that input before it was padded). Likewise one
    reading a tensor of several elements the call was not handed (``reads_untaken``, given those nodes; where the call
    took no model input and no number): computed from none of what it took, nor from constants and weights alone,
    nor a list of integers (a mask the caller anded in). ``given``: the tensors the model itself was given; a tensor
    equal to one of them that is another one was made before the call took it, where one node alone holds it.
    ``made_later``: whether a node equal to a tensor it took cannot hold it (a tensor an earlier call returned is
    held by no node written before that call began): where one cannot, the values do not say which node holds it,
    so the call is not bounded. An input of one number repeated is held by the one node holding that value, or by
    the first of several each passing the one before on, all written before
    the call's results and before any result of a call it made (after one, they are the call's own: a view the
    exporter replayed where it was read); else the nodes holding it are unsure. ``returned``: the tensors calls
    returned. A tensor the call took that none returned was made by code, a node, not by a call
    the exporter folded away: a node of one output (not one of ``several``, a split's) holds one tensor, so of the
    nodes holding its value none known to hold another tensor holds it, where others do (the windows of a map one
    window covers are a new tensor, held where they were cut, not by the norm whose result they equal).
    ``weights``: the tensors that are the model's own parameters and buffers. No node computes one (the file holds
    it as an initializer, or the exporter folded it into what reads it: position embeddings cut into parts), so one
    a call took places no node, however equal a node's value. ``made_after``: a node the call's results were written
    before, or None: of the nodes holding a result of one number repeated, only those before it may hold it (zeros
    a later layer computed, equal to the zeros the call returned). ``runs_inner``: whether a node reads the weights
    of a module the call made a call of (a module within its own), and no call it made returned a result (by key):
    that call ran the node, so it holds that call's values, not the tensor this call's own code made after. Where
    such a node is the first holding such a result, and the others are computed from it, the first of those others
    not passing it on holds it, as where the first holds an inner call's known result (a block returning its input
    plus a scaled difference of two of its children's results, each within rounding of that input: the second
    child's node is its own). ``repeats``: whether a node computes what an earlier one does (one operator, its
    attributes, the same inputs): it holds no value apart from the earlier one's, so of the values equal to a
    result, a repeat of the first is no other that the call may have returned (code computing one sum twice,
    written twice where the exporter does not merge equal values).
    """
    start, inner = span
    claimed, mark = claims
    met = set(known.values()) - several  # the nodes of one output known to hold tensors met before

    def holders_of(key: Hashable, array: "np.ndarray") -> list[int]:
        """The nodes holding a tensor the call took: of one no call returned, none known to hold another tensor,
        where another node holds its value (see ``returned``)."""
        found = [producer[name] for name in find(array)]
        if key in returned:
            return found
        return [i for i in found if i not in met or i == known.get(key)] or found

    taken = {i for key, array in inputs if informative(array) and key not in weights for i in holders_of(key, array)}

    def sized_from(chain: list[int]) -> int:
        """The last place in ``chain`` (nodes passing a value the call took on, in order) of a node reading sizes
        of a value the caller made that the call did not take (``sized_beside``), or a tensor it was not handed
        (``reads_untaken``); 0 where none does."""
        return max((k for k in range(1, len(chain)) if sized_beside(chain[k], chain[k - 1], taken)
                    or reads_untaken(chain[k], chain[k - 1], taken)), default=0)

    def one_run(holders: list[int]) -> bool:
        """Whether each of the nodes holding a value (in order) passes on the one before it."""
        return all(passes_on(later, earlier) for earlier, later in zip(holders, holders[1:]))

    def uniform_holder(array: "np.ndarray") -> int | None:
        """The node holding a result of one number repeated (a branch scaled by zeros returns zeros, attention
        weights of equal scores): the first of the nodes holding that number in that shape written after the call
        began (also before the results of calls it made: it may return a value it computed before them), where
        every other is computed from it through a value that tells something (a later layer's); else None (it
        places no node: the value may have run on through nodes that tell nothing, a chain of faded
        activations)."""
        held = [i for i in holding_one_number(array) if i > start and claimed.get(i, mark) >= mark]
        if len(held) > 1 and (bound := made_after()) is not None:  # (where one is before it: else the nodes
            held = [i for i in held if i < bound] or held  # holding the later tensor were not told apart)
        return held[0] if held and all(descends(i, held[0]) and not descends_telling_nothing(i, held[0])
                                       for i in held[1:]) else None

    firsts = []
    holder_of: dict[Hashable, int | None] = {}  # each result of one number repeated: its holder
    for key, array in outputs:
        if key in known:
            firsts.append(known[key])
            continue
        if not informative(array):
            if (node := holder_of.setdefault(key, uniform_holder(array))) is not None:
                firsts.append(node)
            continue  # else it places no node: the call is bounded by the others
        later = [i for i in _after(find(array), producer, start, inner) if claimed.get(i, mark) >= mark]
        if later:  # (a result no node holds places none: the exporter dropped what nothing read, a state returned
            firsts.append(later[0])  # beside the result; the others bound the call, pushing no node out)
    if not firsts:
        return None
    first = min(firsts)
    sources: list[int] = []
    unsure: set[int] = set()
    for key, array in inputs:
        if key in known:
            chain = [known[key], *runs_on.get(key, ())]
            settled = sized_from(chain)
            sources.extend(chain)
            unsure.update(chain[settled + 1:])
            continue
        if key in weights:
            continue
        if is_input(array):  # the model's input, or a node passing it on (a view of it) before the call
            passed = [i for name in find(array) if (i := producer[name]) < first] if informative(array) else []
            held = passed if informative(array) else [i for i in holding_one_number(array) if i < first]
            if key not in given and len(held) == 1:  # not the very tensor the model was given but one equal to it
                sources.append(held[0])  # (a mask cut to the length of the sequence), which one node alone holds:
                continue  # that node made it before the call began
            sources.extend(passed)
            unsure.update(passed)
            continue
        if informative(array):
            found = [producer[name] for name in find(array)]
            if made_later(key, found):
                return None  # equal to a value written before it was made: which node (if any) holds it is not told
            if not found and (array.dtype.kind in "iu" or folded(array)):
                continue  # integers compare exactly: no node holds it (folded into its readers), so it places none;
                # nor does one the exporter computed from constants and wrote as an initializer
        else:  # one number repeated (a mask that masks nothing): only the one node holding it serves, or the
            # first of several each passing the one before on, all written before the call's results and before
            # any result of a call it made (the caller made it, the others ran it on; but after an inner call's
            # result they are the call's own, a view the exporter replayed where it was read)
            if _uniform(array) is None and faded(array):
                return None  # faded to subnormals: no node is known to hold it, nothing bounds the call from below
            found = holding_one_number(array)
            if len(found) > 1 and all(i < first for i in found) and one_run(found) \
                    and not any(at >= mark and i < found[0] for i, at in claimed.items()):
                pass  # the first made it, as one alone does (below)
            elif len(found) != 1:  # where several do (or none), which one it took is not settled: each that
                held = [i for i in found if start < i < first]  # could be ran in the call or before it
                sources.extend(held)
                unsure.update(held)
                continue
        found = [i for i in found if i not in inside_ended] or found
        before = [i for i in found if i < first] or [i for i in found if i == first]
        if not before:
            return None
        before.sort()
        if copies(before):  # which copy of data it took places no node: none computes anything the call did
            # (but a copy computed from another one written since the last call result before it began was made
            # after that one by what its reader computed from it: the reader's own, not data written for it)
            held = [i for i in before if i > start and not any(descends(i, j) for j in before if start < j < i)]
            sources.extend(held)
            unsure.update(held)
            continue
        if not one_run(before):
            # not one value run on: a tensor met for the first time is none a node holding a tensor met before
            # holds, where the others are one run (a slice of a concatenation giving back a layer's result)
            holding = set(known.values())
            before = [i for i in before if i not in holding]
            if not before or not one_run(before):
                return None  # which one it took is not settled
        elif key not in returned and (alone := [i for i in before if i not in met]) and len(alone) < len(before) \
                and one_run(alone):
            before = alone  # one no call returned: none a node of one output holding a tensor met before holds
        sources.append(before[0])  # the value ran on unchanged: the call took the first, or one after it
        sources.extend(before[1:])
        # (at or after the last node reading other data beside it, where the call took this tensor alone)
        settled = max((k for k in range(1, len(before)) if reads_beside(before[k], before[k - 1])), default=0) \
            if len(inputs) == 1 else 0
        # (and at or after the last node reading sizes of a value the caller made that the call did not take)
        settled = max(settled, sized_from(before))
        unsure.update(before[settled + 1:])
        known[key] = before[0]
        runs_on[key] = before[1:]
    results = []
    mine: list[int] = []
    running_on: list[tuple[int, Hashable, list[int]]] = []  # results run on unchanged: place, tensor, the chain
    for key, array in outputs:
        if key in known:
            results.append(known[key])
            unsure.update(runs_on.get(key, ()))
            continue
        if not informative(array):
            if (node := holder_of[key]) is not None:
                mine.append(node)
                known[key] = node
                results.append(node)
            continue
        candidates = [i for i in _after(find(array), producer, start, inner) if claimed.get(i, mark) >= mark]
        if not candidates:
            continue
        node = candidates[0]
        chain = []
        while True:
            following = [i for i in candidates if i > node and passes_on(i, node, ending=True)]
            if not following:
                break
            node = following[0]
            chain.append(node)
        others = [i for i in candidates[1:] if i not in chain]
        apart = [i for i in others if not descends(i, candidates[0]) and not repeats(i, candidates[0])]
        first_inner = candidates[0] not in claimed and runs_inner(candidates[0], key)
        if others and (candidates[0] in claimed and not remade_inside or first_inner) and not apart:
            # the first holds a result of a call this one made, and the call returned another tensor, equal to it:
            # its own code made that one after the inner call returned, computed from it (a mask of ones applied to
            # a child's result); the first node computing it that does not pass the inner result on made it
            unsure.update(i for i in chain if i < others[0])
            mine.append(others[0])
            known[key] = others[0]
            results.append(others[0])
            runs_on[key] = []
            continue
        if others and (candidates[0] in claimed or apart and returned_later(key, array) < len(apart)):
            return None  # equal to values the call may have returned, none computed from the first: not settled
        mine.extend([candidates[0], *chain])
        known[key] = candidates[0]
        results.append(candidates[0])
        runs_on[key] = chain
        running_on.append((len(results) - 1, key, chain))
    last = max(results, default=-1)
    for place, key, chain in running_on:  # nodes are written as they ran: those passing a result on before the
        ran = [i for i in chain if i < last]  # call's last result was written ran in the call, the last of them
        if ran:  # holding what it returned (a normalization repeated after it settled, before another result)
            results[place] = known[key] = ran[-1]
            runs_on[key] = chain = chain[len(ran):]
        unsure.update(chain)
    for i in mine:
        claimed.setdefault(i, len(claimed))
    return results, sources, unsure


def _runs_anothers_weights(region: tuple[list[int], list[int], set[int]], module: str, owned: Mapping[int, str],
                           ancestors: Callable[..., set[int]], start: int, telling: Callable[[int], bool]) -> bool:
    """Whether the nodes between what a call took and what it returned (``region``: its result nodes, the nodes its
    inputs came from, its unsure ones), taken at the last node holding each input (the fewest), hold one reading the
    weights of a module off the call's line (``owned``), a weight that tells something (``telling``)."""
    results, sources, _ = region
    between = ancestors(results, start) - ancestors(sources, start)
    return any((owner := owned.get(i)) is not None and not is_ancestor(owner, module) and not is_ancestor(module, owner)
               and telling(i) for i in between)


def _undo_point(keys: list[Hashable], known: dict[Hashable, int], runs_on: dict[Hashable, list[int]],
                claimed: dict[int, int]) -> Callable[[], None]:
    """What puts back the maps :func:`_bound` changes for one call: it sets ``known`` and ``runs_on`` only at the
    tensors the call took and returned (``keys``), and only adds to ``claimed``, each node with the count of claims
    before it, so those entries and the count now are all an undo needs (not a copy of every map)."""
    prior = [(key, known.get(key), runs_on.get(key)) for key in keys]
    count = len(claimed)

    def undo() -> None:
        for key, node, chain in reversed(prior):
            if node is None:
                known.pop(key, None)
            else:
                known[key] = node
            if chain is None:
                runs_on.pop(key, None)
            else:
                runs_on[key] = chain
        for node in [node for node, at in claimed.items() if at >= count]:
            del claimed[node]

    return undo


def _rows_reordered(held: "np.ndarray", recorded: "np.ndarray") -> bool:
    """Whether a node output holds a recorded value's rows (along its last axis) each in another order, or its
    slices along the first axis in another order.

    An operation whose result order is unspecified (``topk(sorted=False)``, a sort of equal keys) may order each
    row differently in each runtime, and every value computed from it element by element follows; so does a value
    gathered along its first axis at such indices (tokens grouped by the expert a sort of equal keys gave them).
    """
    import numpy as np

    if held.shape != recorded.shape:
        return False
    if same_values(np.sort(held, axis=-1), np.sort(recorded, axis=-1)):
        return True
    if held.ndim < 2 or held.shape[0] < 2:
        return False

    def slices_in_order(value: "np.ndarray") -> "np.ndarray":
        flat = value.reshape(value.shape[0], -1)
        return flat[np.lexsort(flat.T[::-1])]

    return same_values(slices_in_order(held), slices_in_order(recorded))


def _nearly_uniform(value: "np.ndarray", ends: "tuple[np.floating, np.floating] | None" = None) -> bool:
    """Whether a value of floats, not all one number, has every element of one sign and within :data:`ULPS` units
    in the last place of the others: what one runtime rounds to one number repeated, another may not (a gate of
    halves, each computed from zeros in a few steps rounding half a unit each). Not values about zero: zeros and
    faded values are told apart by the rules for values telling nothing. ``ends``: its :func:`extremes`, where
    the caller has them."""
    import numpy as np

    if value.dtype.kind != "f" or value.size < 2:
        return False
    ends = ends if ends is not None else extremes(value)
    if ends is None:
        return False
    low, high = ends
    if not (np.isfinite(low) and np.isfinite(high)) or low <= 0 <= high:
        return False
    return bool(high - low <= ULPS * np.spacing(max(abs(low), abs(high))))


def _uniform(value: "np.ndarray") -> tuple | None:
    """Shape, element type and the number of a value of two or more elements all one finite number; else None."""
    import numpy as np

    if value.size < 2 or value.dtype.kind not in "fiub":
        return None
    first = value.reshape(-1)[0]
    if value.dtype.kind == "f" and not np.isfinite(first):
        return None
    return (value.shape, value.dtype.str, first.item()) if bool(np.all(value == first)) else None


def _after(names: list[str], producer: dict[str, int], start: int, inner: int) -> list[int]:
    """The nodes holding a call's result, in graph order: written after the call began (``start``), and, where
    one is, at or after the last result of the calls it made (``inner``): a result that barely changed its
    input (a residual branch scaled near zero) equals values the call computed before its last step."""
    after = sorted(i for i in (producer[name] for name in names) if i > start)
    return [i for i in after if i >= inner] or after


def hold_boundaries(node_modules: dict[int, str], boundaries: Boundaries, skipped: set[int],
                    made_for: dict[int, list[int]], owners: dict[int, Owned] | None = None,
                    weighed_for: dict[int, list[int]] | None = None) -> dict[int, str]:
    """The nodes whose module the call boundaries contradict, with the module they settle (module docstring).

    ``node_modules``: each node's module by position; ``skipped``: nodes these rules leave alone (constants);
    ``made_for``: the constants the exporter made for their readers (computed from no weight), with their
    readers: where a reader moves, such a constant goes to the module holding all its readers, and so does an
    integer computed from the model's inputs alone (``boundaries.sizes``), but where it is written while a call
    within that module ran, into that call, and out of a module every call of which began after it
    (:func:`_written_in`: exporters write nodes in the order they ran, and merge a size read again into the first
    node reading it, which ran where it is written); a size measuring model inputs a call took itself, read by
    that call's own code alone, goes into it, readers moved or not (``boundaries.measured_by``). A node inside
    regions of calls on two lines of the tree goes to the call whose region lies within every other one (a
    module instance registered under two parents, called by the second: PyTorch names each of its calls by the
    first name); where no region does (a value the exporter shared), it is left as it is. A node tagged with a
    module none of whose calls ran (a container of layers, which has no forward of its own: where a strategy
    moved a node out of one of its layers, or took the layers' common ancestor) goes to the nearest module
    that was called. A node whose call the values leave open between one call and its caller (``unplaced``)
    ran in that call where it is written between two nodes of its region: exporters write nodes in the order
    they ran; one that made a new tensor the call took which the caller was not handed ran in the caller, bounded
    or not (``made_in``). ``owners``: for nodes left open (``handed_on`` or ``between``), those of the modules it
    may have run in (the calls and their callers, :func:`_open_between`) owning a parameter or buffer (their own, not a
    child's) equal to a weight the node reads (:func:`weight_owners`); where one alone does, it ran in that call,
    and so did what made the value it read from those tensors. ``weighed_for``: the constants computed from
    weights (a function of a parameter), with their readers: where all its readers lie within a module below
    the one it is tagged with, it goes to that module, unless a call of it took the value (``ran_before``): the
    calls its readers ran in computed it (a gate's sigmoid of its own parameter, which equal parameters
    elsewhere leave unowned). Last, the constants holding a call's result that the call made
    (``boundaries.made_constant``) go into it.
    """
    inside: dict[int, list[str]] = defaultdict(list)
    regions_of: dict[int, list[CallRegion]] = defaultdict(list)
    for region in boundaries.regions:
        for i in region.nodes:
            inside[i].append(region.module)
            regions_of[i].append(region)
    bounding = boundaries.bounding
    spans: dict[int, list[CallRegion]] = defaultdict(list)  # the regions each unplaced node was written amid
    unplaced = sorted(boundaries.unplaced)
    for region in boundaries.regions:
        if region.nodes:
            low, high = min(region.nodes), max(region.nodes)
            for i in unplaced[bisect_right(unplaced, low):bisect_left(unplaced, high)]:
                spans[i].append(region)
    moved: dict[int, str] = {}
    for i, module in node_modules.items():
        if i in skipped:
            continue
        if i in boundaries.loose:  # where it ran is not settled, but not in a module every call of which it ran
            tag = _out_of_ran_before(i, module, boundaries)  # before: what computed a value a call took ran before
            if tag != module:  # it, merged with an equal one or not
                moved[i] = tag
            continue
        containing = inside.get(i, [])
        if i in boundaries.unplaced:  # only the calls enclosing those it ran in or beside pull it in
            either = boundaries.undecided.get(i)
            containing = [m for m in containing if not any(is_ancestor(e, m) for e in either)] if either else []
            # unless it was written amid one of those calls, between two nodes that ran in it: it ran in that call
            containing += [r.module for r in spans.get(i, ()) if either and r.module in either]
            # or a caller that made what a call took, which it was not handed, where every call left open is its own
            if i in boundaries.made_in and either and all(is_ancestor(boundaries.made_in[i], e) for e in either):
                containing.append(boundaries.made_in[i])
        deepest = _deepest(containing)
        if containing and deepest is None:
            # regions of calls on two lines of the tree hold it: where one call ran within the other (its region
            # lies in the other's: a module instance registered under two parents, called by the second), the
            # inner call ran it; else (a value the exporter shared between two calls) it is left as it is
            holding = [r for r in regions_of[i] if r.module in containing]
            inner = [r for r in holding if all(r.nodes <= other.nodes for other in holding)]
            if not inner or inner[0].module == module:
                continue
            deepest = inner[0].module
            if is_ancestor(deepest, module):
                continue
            moved[i] = deepest
            continue
        if deepest is not None and not is_ancestor(deepest, module):
            tag = deepest  # into the deepest call that ran it
        else:
            tag = module
            parts = tag.split(".") if tag else []
            floor = len(deepest.split(".")) if deepest else 0
            for depth in range(len(parts), floor, -1):  # out of every module below it whose calls all ran without it
                within = ".".join(parts[:depth])
                held = None if within in boundaries.sized and i in boundaries.counting else bounding.get(within)
                if held is not None and i not in held or i in boundaries.ran_before.get(within, ()) \
                        or i in boundaries.ran_after.get(within, ()) or i >= boundaries.ended_before.get(within, i + 1) \
                        or within in boundaries.feeding_results and i not in boundaries.feeding_results[within]:
                    tag = ".".join(parts[:depth - 1])
        if tag != module:
            moved[i] = tag
    for i, (returning, taking) in boundaries.between.items():
        if i not in node_modules:
            continue
        placed = moved.get(i, node_modules[i])
        both = common_ancestor([returning, taking])
        if i in boundaries.carried and in_sibling_elements(returning, taking) and is_ancestor(returning, placed) \
                and not any(is_ancestor(both, m) and m != both for m in inside.get(i, ())):
            moved[i] = both  # nothing says the layer returning the value passed it on: it may be the next one
        elif not (is_ancestor(returning, placed) or is_ancestor(taking, placed)
                  or is_ancestor(both, placed) and (is_ancestor(placed, returning) or is_ancestor(placed, taking))):
            moved[i] = both  # a tag off every line it may have run on: their common ancestor holds them all
    for i, (made_in, returned_in) in boundaries.returned_through.items():
        placed = moved.get(i, node_modules.get(i, ""))  # a call on the line that returned it, not the one making it
        if i in node_modules and i not in skipped and is_ancestor(returned_in, placed) \
                and is_ancestor(placed, made_in) and placed != made_in:
            moved[i] = returned_in.rpartition(".")[0]  # not a call that returned it as a call it made had returned it
    for i, module in [*boundaries.shaped_within.items(), *boundaries.cast_back.items()]:
        if i in node_modules and i not in skipped and moved.get(i, node_modules[i]) != module:
            moved[i] = module
    for i, owned in (owners or {}).items():
        # a node left open between calls that reads a weight equal to a parameter of one of the modules it may
        # have run in, and of no other: a module reads its own parameters (a layer scale of ones, a norm's weight,
        # a shift computed from its statistics); what made the value it read from weights alone goes with it
        if i not in node_modules or i in skipped or i in boundaries.loose:
            continue
        if len(owned.modules) == 1:  # owners are listed among the modules it may have run in (``_open_between``)
            (module,) = owned.modules
            for j in (i, *owned.feeding, *owned.computing):
                if j in node_modules and j not in boundaries.loose \
                        and not is_ancestor(module, moved.get(j, node_modules[j])):
                    moved[j] = module
    for i in skipped & set(node_modules):  # a constant a call's inputs were computed from ran before it too
        tag = _out_of_ran_before(i, node_modules[i], boundaries)
        if tag != node_modules[i]:
            moved[i] = tag
    for i, source in boundaries.crops.items():  # a crop of nothing ran where what it crops was made
        if i in node_modules and source in node_modules and i not in skipped:
            tag = moved.get(source, node_modules[source])
            if tag != moved.get(i, node_modules[i]) and all(is_ancestor(m, tag) for m in inside.get(i, ())):
                moved[i] = tag
    # sizes built into one node's operand, sizes, then constants, with their readers
    calls_of: dict[str, list[CallRegion]] = defaultdict(list)
    for region in boundaries.regions:
        calls_of[region.module].append(region)
    for kind, found in (("built", boundaries.built_for), ("size", boundaries.sizes), ("made", made_for)):
        for i, readers in found.items():
            if i not in node_modules or not readers:
                continue
            tag = common_ancestor(moved.get(reader, node_modules.get(reader, "")) for reader in readers)
            if kind == "size" and (measurer := _nearest_called(tag, boundaries)) in boundaries.measured_by.get(i, ()) \
                    and all(_nearest_called(moved.get(r, node_modules.get(r, "")), boundaries) == measurer
                            for r in readers):
                # sizes of model inputs a call took itself, read by nothing but its own code: it measured them (not
                # where a call within it reads them: exporters merge equal sizes, that call's own among them)
                if measurer != node_modules[i]:
                    moved[i] = measurer
                continue
            if kind == "size":  # a size read by several calls ran in the call running where it is written
                tag = _written_in(i, tag, boundaries, calls_of)
            tag = _out_of_ran_before(i, tag, boundaries)  # not into a call it ran before
            if kind != "made":  # nor, computed from the model's inputs, into a call that began after it was written
                tag = _out_of_begun_after(i, tag, boundaries)
            if tag != node_modules[i] and any(reader in moved for reader in readers):
                moved[i] = tag
    for i, readers in made_for.items():
        if i not in node_modules or not readers:
            continue
        running = _running_call(i, moved.get(i, node_modules[i]), boundaries,
                                [moved.get(r, node_modules.get(r, "")) for r in readers])
        if running is not None:
            moved[i] = running
    for i, readers in (weighed_for or {}).items():
        if i not in node_modules or not readers:
            continue
        tag = moved.get(i, node_modules[i])
        within = _out_of_ran_before(i, common_ancestor(moved.get(r, node_modules.get(r, "")) for r in readers),
                                    boundaries)
        while within and boundaries.called and within not in boundaries.called:  # a container runs no node
            within = within.rpartition(".")[0]
        if within != tag and is_ancestor(tag, within):
            moved[i] = within
    for i, module in boundaries.made_constant.items():  # a call made the constants holding its result
        if i in node_modules and not is_ancestor(module, moved.get(i, node_modules[i])):
            moved[i] = module
    if boundaries.called:  # last, on every tag the rules above give: a module never called (a container: a list
        for i, module in node_modules.items():  # of layers) runs no node, its caller did
            tag = moved.get(i, module)
            called = _nearest_called(tag, boundaries)
            if called != tag:
                moved[i] = called
    return {i: tag for i, tag in moved.items() if tag != node_modules[i]}


def _written_in(node: int, tag: str, boundaries: Boundaries, calls_of: Mapping[str, list[CallRegion]]) -> str:
    """The module of the call running where size ``node`` is written, for a size whose readers' common module is
    ``tag``: the deepest module within ``tag`` a call of which has it between the first node it kept and its
    last result; else ``tag``, or the nearest module above it, out of every module each call of which began
    after it (written before the last node holding a value the call took) and out of modules never called (a
    list of layers). Exporters write nodes in the order they ran and merge a later equal size into the first one
    read, so a size read by several calls (an element of a list of layers, then the next ones) ran where it was
    first read: in the call running there. ``calls_of``: each module's bounded calls."""
    amid = [region.module for region in boundaries.regions
            if region.span is not None and region.span[0] < node <= region.span[1] and is_ancestor(tag, region.module)]
    if amid:
        return max(amid, key=lambda module: len(module.split(".")) if module else 0)
    while (tag := _nearest_called(tag, boundaries)) and tag not in boundaries.unbounded \
            and (calls := calls_of.get(tag)) and all(call.began is not None and node < call.began for call in calls):
        tag = tag.rpartition(".")[0]  # every call of it began after the size was written: it ran in none
    return tag


def _nearest_called(tag: str, boundaries: Boundaries) -> str:
    """``tag``, or the nearest module above it some call of which ran: a module never called (a list of layers)
    runs nothing, its caller did (where which modules were called is known)."""
    while tag and boundaries.called and tag not in boundaries.called:
        tag = tag.rpartition(".")[0]
    return tag


def _out_of_ran_before(node: int, tag: str, boundaries: Boundaries) -> str:
    """``tag``, or the nearest module above it whose calls ``node`` did not all run before: out of the outermost
    module holding ``tag`` every call of which ran after it (a call runs within its caller's calls, so a node
    that ran before every call of a module ran before every call of a module within it)."""
    return _out_of_outermost(tag, lambda module: node in boundaries.ran_before.get(module, ()))


def _out_of_outermost(tag: str, began_after_it: Callable[[str], bool]) -> str:
    """``tag``, or the parent of the outermost module holding ``tag`` for which ``began_after_it`` holds."""
    parts = tag.split(".") if tag else []
    for depth in range(1, len(parts) + 1):
        if began_after_it(".".join(parts[:depth])):
            return ".".join(parts[:depth - 1])
    return tag


def _out_of_begun_after(node: int, tag: str, boundaries: Boundaries) -> str:
    """``tag``, or the nearest module above it out of the outermost module holding ``tag`` called once and beginning
    after ``node`` was written (``boundaries.began_after``: at or before the last result of a call that ended
    before it began). Exporters write the nodes computed from the model's inputs in the order they ran (not so
    constants, placed where the exporter puts them), and a call runs within its caller's: a node that ran before
    a call began ran before every call within it."""
    return _out_of_outermost(tag, lambda module: node <= boundaries.began_after.get(module, -1))


def _serving_only(nodes: set[int], readers: Mapping[int, Iterable[int]], served: set[int]) -> set[int]:
    """The most of ``nodes`` whose every reader is ``served`` or one of them: what was made for those alone (a
    node serving others too was not)."""
    serving = set(nodes)
    while True:
        kept = {j for j in serving if all(r in serving or r in served for r in readers.get(j, ()))}
        if kept == serving:
            return kept
        serving = kept


def _open_between(node: int, boundaries: Boundaries) -> set[str]:
    """The modules a node the values leave open may have run in: a call that returned a new tensor equal to what
    it took, passed on by the node, and that call's caller (``handed_on``), or the two calls it ran between and
    the modules on the lines from their common ancestor down to them (``between``); empty for other nodes."""
    modules: set[str] = set()
    for module in boundaries.handed_on.get(node, ()):
        modules |= {module, module.rpartition(".")[0] if module else ""}
    if node in boundaries.between:
        returning, taking = boundaries.between[node]
        both = common_ancestor([returning, taking])
        for end in (returning, taking):
            parts = end.split(".") if end else []
            floor = len(both.split(".")) if both else 0
            modules |= {".".join(parts[:depth]) for depth in range(floor, len(parts) + 1)}
    return modules


@dataclass
class Owned:
    """What a node left open reads of weights: the modules owning a tensor of their own equal to one of them,
    and the nodes that made what it read from those tensors (with constants and sizes), read by nothing else (a
    norm's shift computed from its statistics): they go where the node goes. ``computing``: where one module alone
    owns them, the nodes left open that may have run in it and in no module within it, and computed the data it
    read, back to the first that may not (a norm's scaling before the shift that names it): that module ran them
    too: a call computes from the tensors it took, its weights, constants and what the calls it made returned. It
    stops at the nodes holding what the module's calls took (``Boundaries.took``), which made it before they began;
    none of the calls it made may have run these."""

    modules: set[str]
    feeding: set[int]
    computing: set[int] = field(default_factory=set)


def weight_owners(graph: "onnx.GraphProto", model: "torch.nn.Module", candidates: dict[int, set[str]],
                  weight: Callable[["onnx.TensorProto"], "np.ndarray"] | None = None,
                  holding: set[int] | frozenset[int] = frozenset(),
                  took: Mapping[str, set[int]] | None = None) -> dict[int, Owned]:
    """For each node of ``candidates`` reading weights of the graph (initializers of floats, more than one),
    directly or through values computed from weights, constants and sizes alone, those of its candidate modules
    owning a parameter or buffer of their own (not a child's) equal to one of them element for element (the
    exporter may have reshaped it: a scale of one number per channel; or merged equal ones into one), or holding
    it as whole rows of its last axis in a run (a slice the exporter computed once: :func:`_holds_run`); where one
    of those modules owns every weight the node reads, that one alone. Nodes reading no such weight are left
    out. ``holding``: nodes holding calls' values (a call's result, computed
    from its weights alone: a positional table), through which no weight is read. ``took``: for each module, the
    nodes holding the tensors its calls took (:attr:`Boundaries.took`), where :attr:`Owned.computing` stops."""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    float_types = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    producer = {name: i for i, node in enumerate(graph.node) for name in node.output if name}
    data_free = constant_nodes(graph, sizes=True)
    readers = _readers(graph, producer)

    def feeding(i: int) -> tuple[list[str], set[int]]:
        """The weights node ``i`` reads, directly or through data-free values, and the data-free nodes that made
        what it reads and serve nothing else."""
        weights: list[str] = []
        made: set[int] = set()
        stack = [i]
        while stack:
            node = graph.node[stack.pop()]
            for name in node.input:
                if name in initializers:
                    weights.append(name)
                elif name in producer and (j := producer[name]) in data_free and j not in made and j not in holding:
                    made.add(j)
                    stack.append(j)
        return weights, _serving_only(made, readers, {i})

    modules = dict(model.named_modules())
    arrays: dict[str, "np.ndarray"] = {}

    def array_of(name: str) -> "np.ndarray":
        if name not in arrays:
            try:
                arrays[name] = np.asarray((weight or numpy_helper.to_array)(initializers[name]), dtype=np.float32)
            except Exception:  # noqa: BLE001 - a stub without its data
                arrays[name] = np.zeros(0, dtype=np.float32)
        return arrays[name]

    def owns(qualname: str, name: str) -> bool:
        module = modules.get(qualname)
        if module is None:
            return False
        size = int(np.prod(initializers[name].dims))
        return any(tensor.numel() >= size and tensor.is_floating_point()
                   and _holds_run(tensor.detach().cpu().float().numpy(), array_of(name).reshape(-1))
                   for tensor in (*module.parameters(recurse=False), *module.buffers(recurse=False)))

    owners: dict[int, Owned] = {}
    for i, among in candidates.items():
        if i >= len(graph.node):
            continue
        names, made = feeding(i)
        weights = [name for name in dict.fromkeys(names) if initializers[name].data_type in float_types
                   and int(np.prod(initializers[name].dims)) > 1]
        pairs = {(qualname, name) for qualname in among for name in weights if owns(qualname, name)}
        if not pairs:
            continue
        owned = {name for _, name in pairs}
        # a module reads its own weights: where one of them owns every weight read, it ran the node (the others
        # own a tensor equal to one of them alone: zeros of a bias)
        owning = set.intersection(*({qualname for qualname, of in pairs if of == name} for name in owned)) \
            or {qualname for qualname, _ in pairs}
        carried: set[int] = set()  # what made the value it read from an owned weight (not what sizes alone made)
        for j in sorted(made):
            if any(name in owned or name in producer and producer[name] in carried for name in graph.node[j].input):
                carried.add(j)
        computing: set[int] = set()
        if len(owning) == 1:
            (module,) = owning
            given = (took or {}).get(module, set())
            stack = [i]
            while stack:
                for name in graph.node[stack.pop()].input:
                    if name in producer and (j := producer[name]) not in computing and j not in data_free \
                            and j not in given and module in (among_j := candidates.get(j, set())) \
                            and not any(m != module and is_ancestor(module, m) for m in among_j):
                        computing.add(j)
                        stack.append(j)
        owners[i] = Owned(owning, carried, computing)
    return owners


def _holds_run(tensor: "np.ndarray", part: "np.ndarray") -> bool:
    """Whether a tensor's elements equal the flat array ``part``, or hold it as whole rows of its last axis in a
    run: a slice of a weight along its first axes, which the exporter computed once and wrote as a weight of its
    own (a positional table less its first row)."""
    import numpy as np

    whole = tensor.reshape(-1)
    if whole.size == part.size:
        return bool(np.array_equal(whole, part))
    if tensor.ndim < 2 or whole.size < part.size or part.size == 0 or part.size % tensor.shape[-1]:
        return False
    row = tensor.shape[-1]
    starts = np.flatnonzero(whole[: whole.size - part.size + 1: row] == part[0])[:RUN_STARTS] * row
    return any(np.array_equal(whole[start:start + part.size], part) for start in starts)


RUN_STARTS = 16
"""The first row starts tried where a weight's first element occurs in a larger one (:func:`_holds_run`)."""

CASTS = frozenset({"Cast", "CastLike"})
COPYING_OPS = frozenset({"Cast", "CastLike", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand"})
"""Operations whose result equal to their input copies it (values equal by coincidence prove nothing: a Relu
of a value with no negative element)."""


def _running_call(node: int, tag: str, boundaries: Boundaries, readers: list[str]) -> str | None:
    """The call a constant made for its readers ran in, where its tag lies outside it: the deepest bounded call
    written around it (between two nodes that ran in it: it ran while that call ran; or after the last node
    holding a value the call took and before its first node: the caller would have handed over a constant it made
    for the call's nodes alone) whose module holds every reader and which did not take it from its caller (nor did
    a call it ran within: what ran before a call ran before the calls it made). None where no call holds it, or its
    tag lies within that call (a constant written just before a child call's first node may be the child's own, or
    one the exporter merged with equal constants of other calls: the values cannot say)."""
    readers_at = common_ancestor(readers)
    holding = [region.module for region in boundaries.regions
               if region.span is not None
               and (region.span[0] if region.began is None else region.began) < node < region.span[1]
               and is_ancestor(region.module, readers_at)
               and _out_of_ran_before(node, region.module, boundaries) == region.module]
    deepest = _deepest(holding)  # each holds every reader: they lie on one line
    return None if deepest is None or is_ancestor(deepest, tag) else deepest


def _deepest(modules: list[str]) -> str | None:
    """The deepest of modules that lie on one line of descent; None if two of them do not."""
    deepest: str | None = None
    for module in modules:
        if deepest is None or is_ancestor(deepest, module):
            deepest = module
        elif not is_ancestor(module, deepest):
            return None
    return deepest


def hold_call_boundaries(ctx: "ExportContext", onnx_model: "onnx.ModelProto", node_modules: dict[str, str],
                         exporter: str, weights: "Path | StreamedModel | None" = None,
                         values: dict[str, "np.ndarray"] | None = None,
                         events: list[Event] | None = None, index: "GraphIndex | None" = None,
                         owned: Mapping[str, str] | None = None,
                         weighing: Mapping[str, Collection[str]] | None = None) -> dict[str, str]:
    """The nodes (by name) whose module the values crossing each module call's boundary settle otherwise, with
    that module; none where the model or the file cannot run on ``ctx.args``. Constants keep the strategy's
    tags, except where their readers moved. ``owned``: nodes (by name) reading a weight of one module alone, with
    that module (:func:`call_regions`); ``weighing``: nodes (by name) reading a weight equal to parameters or
    buffers, with every module holding an equal one.

    ``events``: the calls recorded while the exporter ran the model (:func:`recording_calls`), where the strategy
    has them; else the model runs once more as ``exporter`` ran it. ``values``: the file's node outputs on
    ``ctx.args`` where the strategy has them (else onnxruntime computes them, the weights taken from ``weights``
    for a graph loaded without them). ``index``: the graph's :class:`GraphIndex`, where the caller has built one.
    """
    import torch

    from modelexport_core.export.exporters import as_exported
    from modelexport_core.format.graph import GraphIndex
    from modelexport_core.format.intermediate import intermediate_values

    def recorded(as_run: str | None) -> list[Event]:
        with torch.no_grad(), as_exported(as_run):
            return record_calls(ctx.model, lambda: ctx.module(*ctx.args))

    try:
        if not events:
            try:
                events = recorded(exporter)
            except Exception:  # noqa: BLE001 - the exporter's path does not run eagerly (code reading traced sizes)
                events = recorded(None)
        if values is None:
            values = intermediate_values(onnx_model, ctx.input_names, ctx.args, weights)
    except Exception:  # noqa: BLE001 - without the values the strategy's tags stand
        return {}
    graph = onnx_model.graph
    keys = (index if index is not None else GraphIndex.of(graph)).keys
    positions = {key: i for i, key in enumerate(keys)}
    boundaries = call_regions(graph, values, events, [tensor.detach().cpu().numpy() for tensor in ctx.args],
                              _weight_reader(weights),
                              {positions[key]: module for key, module in (owned or {}).items() if key in positions},
                              list(ctx.input_names),
                              {positions[key]: modules for key, modules in (weighing or {}).items() if key in positions})
    constant = constant_nodes(graph)
    candidates = {i: _open_between(i, boundaries) for i in set(boundaries.handed_on) | set(boundaries.between)}
    owners = weight_owners(graph, ctx.model, candidates, _weight_reader(weights), boundaries.holding,
                           boundaries.took) \
        if candidates else {}
    moved = hold_boundaries({positions[key]: module for key, module in node_modules.items() if key in positions},
                            boundaries, constant, made_for_readers(graph, constant), owners,
                            made_for_readers(graph, constant, weighed=True))
    return {keys[i]: module for i, module in moved.items()}


def _weight_reader(weights: "Path | StreamedModel | None") -> Callable[["onnx.TensorProto"], "np.ndarray"] | None:
    """How to read an initializer's value of a graph held without its data: from the exporter's bytes, or from
    the file the graph was read from (:func:`~modelexport_core.format.onnx_file.load_graph`); None: the graph
    holds it."""
    from pathlib import Path

    from modelexport_core.format.onnx_file import tensor_value

    if weights is None:
        return None
    if isinstance(weights, Path):
        folder = weights.parent
        return lambda tensor: tensor_value(tensor, folder)
    return weights.value
