"""The broker module `reactorflow worker` hands to Dramatiq's CLI.

Each worker process imports this module first: it imports the user's modules (named in
REACTORFLOW_WORKER_MODULES, so their reactors are registered and any `rf.configure(...)` they
make applies), then exposes the broker reactorflow's actors are declared on as `broker`.
"""

from __future__ import annotations

import importlib
import os

import dramatiq

from reactorflow import config
from reactorflow.errors import ConfigurationError
from reactorflow.workers.broker import actors_for, current_broker, is_embedded
from reactorflow.workers.health import guard

for _module in filter(None, os.environ.get(config.WORKER_MODULES_ENV, "").split(",")):
    importlib.import_module(_module)

broker: dramatiq.Broker = current_broker()
if is_embedded(broker):
    raise ConfigurationError(
        "reactorflow worker needs a broker shared with the processes that enqueue: set "
        f"{config.REDIS_URL_ENV} or call rf.configure(broker=...) in one of your modules",
        option="broker",
    )
actors_for(broker)
guard(broker)  # a lost broker: backoff, one log line when lost and one when back
dramatiq.set_broker(broker)
