"""Configuration: the option registry, attribute objects and configuration loaders (seed 5).

- :data:`REGISTRY` holds every option (name, scopes, type, default, doc, guide section).
- :class:`Attributes` and its scope classes hold one object's options.
- :class:`Config` layers flat files, XML files, mappings and ``--option`` lines.
"""

from openum.config._attributes import (
    Attributes,
    ContextAttributes,
    EventQueueAttributes,
    ReceiverAttributes,
    SourceAttributes,
    WildcardReceiverAttributes,
    attributes_for,
)
from openum.config._config import Config, ConfigSource, default_config, load_config, reset_default_config
from openum.config._flat import Setting, parse_flat_file, parse_flat_text, parse_option_line
from openum.config._index import REGISTRY
from openum.config._registry import SCOPES, Option, Registry, normalize_scope
from openum.config._xml import XmlConfig, parse_xml_file, parse_xml_text

__all__ = [
    "REGISTRY",
    "SCOPES",
    "Attributes",
    "Config",
    "ConfigSource",
    "ContextAttributes",
    "EventQueueAttributes",
    "Option",
    "ReceiverAttributes",
    "Registry",
    "Setting",
    "SourceAttributes",
    "WildcardReceiverAttributes",
    "XmlConfig",
    "attributes_for",
    "default_config",
    "load_config",
    "normalize_scope",
    "parse_flat_file",
    "parse_flat_text",
    "parse_option_line",
    "parse_xml_file",
    "parse_xml_text",
    "reset_default_config",
]
