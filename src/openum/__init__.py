"""openum: a brokerless publish/subscribe library speaking Ultra Messaging's wire protocol.

The public API is what this module exports (``__all__``); every other module is internal.
"""

from openum._context import Context, LogCallback
from openum._errors import (
    LBM_EINVAL,
    LBM_ENOMEM,
    LBM_EOP,
    LBM_EOS,
    LBM_ETIMEDOUT,
    LBM_EWOULDBLOCK,
    LBM_FAILURE,
    ClosedError,
    ConfigError,
    InvalidStateError,
    NoMemoryError,
    OpenUMError,
    SystemCallError,
    TimedOutError,
    WouldBlock,
)
from openum._version import __version__
from openum.config import (
    Attributes,
    Config,
    ContextAttributes,
    EventQueueAttributes,
    ReceiverAttributes,
    SourceAttributes,
    WildcardReceiverAttributes,
    load_config,
)
from openum.runtime import EventQueue, EventQueueStatistics, FdEvent, ManualClock, QueueMonitorEvent

__all__ = [
    "LBM_EINVAL",
    "LBM_ENOMEM",
    "LBM_EOP",
    "LBM_EOS",
    "LBM_ETIMEDOUT",
    "LBM_EWOULDBLOCK",
    "LBM_FAILURE",
    "Attributes",
    "ClosedError",
    "Config",
    "ConfigError",
    "Context",
    "ContextAttributes",
    "EventQueue",
    "EventQueueAttributes",
    "EventQueueStatistics",
    "FdEvent",
    "InvalidStateError",
    "LogCallback",
    "ManualClock",
    "NoMemoryError",
    "OpenUMError",
    "QueueMonitorEvent",
    "ReceiverAttributes",
    "SourceAttributes",
    "SystemCallError",
    "TimedOutError",
    "WildcardReceiverAttributes",
    "WouldBlock",
    "__version__",
    "load_config",
]
