"""verl's ``compute_advantage`` (``verl.trainer.ppo.ray_trainer``), importable where torchdata is not installed.

verl's trainer module imports torchdata's StatefulDataLoader for its dataloaders (a GPU environment's verl install
brings it; hopforge's lock does not); ``compute_advantage`` never touches it.  Stubs stand in while verl binds the
name, then go: a stub left in sys.modules (no ``__spec__``) makes a later ``importlib.util.find_spec("torchdata")``
raise, e.g. transformers' check in the SFT tests run in the same process.
"""

import importlib.util
import sys
import types

_STUBS: list[str] = []
if importlib.util.find_spec("torchdata") is None:
    _td = types.ModuleType("torchdata.stateful_dataloader")
    _td.StatefulDataLoader = object
    for _name, _module in (("torchdata", types.ModuleType("torchdata")), ("torchdata.stateful_dataloader", _td)):
        if _name not in sys.modules:
            sys.modules[_name] = _module
            _STUBS.append(_name)

from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402

for _name in _STUBS:
    sys.modules.pop(_name, None)

__all__ = ["compute_advantage"]
