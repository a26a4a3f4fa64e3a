"""openum: a brokerless publish/subscribe library speaking Ultra Messaging's wire protocol.

The public API is what this module exports (``__all__``); every other module is internal.
``COMPILED`` tells whether the hot paths run compiled (mypyc) or as pure Python (see ``openum._accel``).
"""

from openum._accel import COMPILED  # first: it chooses between the compiled and the pure-Python modules
from openum._context import Context, ContextStatistics, LogCallback
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
    DaemonConnectionError,
    InvalidStateError,
    NoMemoryError,
    NotSupportedError,
    OpenUMError,
    SystemCallError,
    TimedOutError,
    WouldBlock,
)
from openum._immediate import Request, Response
from openum._message import Message, MsgFlags, MsgType, SourceEvent
from openum._receiver import Receiver, ReceiverStatistics, WildcardReceiver
from openum._source import SendFlags, Source
from openum._source_string import SourceString, SourceStringError
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
from openum.transport.uim import UimConnectionError

__all__ = [
    "COMPILED",
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
    "ContextStatistics",
    "DaemonConnectionError",
    "EventQueue",
    "EventQueueAttributes",
    "EventQueueStatistics",
    "FdEvent",
    "InvalidStateError",
    "LogCallback",
    "ManualClock",
    "Message",
    "MsgFlags",
    "MsgType",
    "NoMemoryError",
    "NotSupportedError",
    "OpenUMError",
    "QueueMonitorEvent",
    "Receiver",
    "ReceiverAttributes",
    "ReceiverStatistics",
    "Request",
    "Response",
    "SendFlags",
    "Source",
    "SourceAttributes",
    "SourceEvent",
    "SourceString",
    "SourceStringError",
    "SystemCallError",
    "TimedOutError",
    "UimConnectionError",
    "WildcardReceiver",
    "WildcardReceiverAttributes",
    "WouldBlock",
    "__version__",
    "load_config",
]
