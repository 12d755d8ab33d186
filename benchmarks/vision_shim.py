"""Let torchvision import beside the project's pinned CPU torch, for the benchmark environment only.

torchvision's compiled extension (``_C.so``) is built against another torch and fails to load; torchvision then
still registers fake kernels for ``torchvision::nms`` and ``torchvision::qnms`` at import, which dies because the
operators were never defined. Declaring the two schemas first (no kernels: nothing here runs NMS) lets the
import go on; every model this project measures is made of plain torch ops. transformers imports torchvision
when it is installed, so this must run before transformers is imported too. See DEVELOPERS.md.
"""

from __future__ import annotations

import importlib.util

_LIBRARY = None  # the torch.library.Library must stay alive for its definitions to stay


def apply() -> bool:
    """Declare torchvision's NMS operators where its extension cannot; True when the shim was needed."""
    global _LIBRARY
    if _LIBRARY is not None or importlib.util.find_spec("torchvision") is None:
        return False
    import torch

    try:
        _ = torch.ops.torchvision.nms.default  # the extension loaded (or the ops are declared already)
        return False
    except (AttributeError, RuntimeError):
        pass
    if _extension_loads():
        return False
    library = torch.library.Library("torchvision", "DEF")
    library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _LIBRARY = library
    return True


def _extension_loads() -> bool:
    """Whether torchvision's ``_C`` loads into this torch (then torchvision defines its ops itself)."""
    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    from pathlib import Path

    for folder in spec.submodule_search_locations:
        for candidate in Path(folder).glob("_C*.so"):
            try:
                torch.ops.load_library(str(candidate))
            except (OSError, RuntimeError):
                return False
            return hasattr(torch.ops.torchvision, "nms")
    return False
