"""The execution layer: the engine (`engine`), the run operations behind `Reactor`'s methods
(`ops`), the services beside workers (`services`), maps (`maps`) and gates (`gates`).

Importing it registers the map step kind in the engine's step-kind table (`runtime.maps`)."""

from reactorflow.runtime import maps as maps
from reactorflow.runtime.engine import sleeps as sleeps
