"""Configuration: the option registry, attribute objects and configuration loaders (seed 5).

- :data:`REGISTRY` holds every option (name, scopes, type, default, doc, guide section) and what openum
  implements of it (:data:`IMPLEMENTED`): an option openum does not implement is refused when set,
  unless :func:`set_unimplemented_policy` (or ``OPENUM_UNIMPLEMENTED_OPTIONS=warn``) lets it through.
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
from openum.config._implemented import (
    ENV_POLICY,
    IMPLEMENTED,
    set_unimplemented_policy,
    unimplemented_policy,
)
from openum.config._index import REGISTRY
from openum.config._registry import SCOPES, Option, Registry, Support, normalize_scope
from openum.config._xml import XmlConfig, parse_xml_file, parse_xml_text

__all__ = [
    "ENV_POLICY",
    "IMPLEMENTED",
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
    "Support",
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
    "set_unimplemented_policy",
    "unimplemented_policy",
]
