"""Map steps at run time: the map step kind (`map_step`, registered in the engine's step-kind
table on import), the inline window (`inline_window`), one element's call (`elements`), element
reactors (`children`), fan-out (`fanout`) and rolling a map back (`undo`). Element outcomes live
in the storage contract's element slots, never in the run's step records."""

from reactorflow.definition.specs import StepKind
from reactorflow.runtime.engine import kinds
from reactorflow.runtime.maps import map_step

kinds.register(StepKind.MAP, map_step.HANDLER)
