"""Config descriptions shared by DescribeConfigs, CreateTopics and the alters.

Sources are Kafka's ConfigSource numbers: 1 dynamic topic config, 4 static
broker config (server.properties or --override), 5 default.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.broker.config import DEFAULTS, BrokerConfig
from odradek.metadata.topic_configs import TOPIC_CONFIGS

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# Kafka's ConfigType numbers (DescribeConfigs v3+).
CONFIG_TYPE = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}


def topic_config_entries(
    overrides: Mapping[str, str], config: BrokerConfig
) -> list[tuple[str, str, int, int, list[tuple[str, str, int]]]]:
    """(name, value, source, type, synonyms) for every topic config, sorted by name.

    Synonyms are listed most specific first, as Kafka does.
    """
    out = []
    for name, d in sorted(TOPIC_CONFIGS.items()):
        synonyms: list[tuple[str, str, int]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], SOURCE_TOPIC))
        if d.synonym and d.synonym in config.explicit:
            synonyms.append((d.synonym, config.explicit[d.synonym], SOURCE_STATIC_BROKER))
        synonyms.append((d.synonym or name, d.default, SOURCE_DEFAULT))
        value, source = synonyms[0][1], synonyms[0][2]
        out.append((name, value, source, CONFIG_TYPE.get(d.kind, 0), synonyms))
    return out


def broker_config_entries(config: BrokerConfig) -> list[tuple[str, str, int, int]]:
    """(name, value, source, type) for every broker config Odradek reads."""
    out = []
    for name in sorted(DEFAULTS):
        if name in config.explicit:
            out.append((name, config.explicit[name], SOURCE_STATIC_BROKER, 2))
        else:
            out.append((name, DEFAULTS[name], SOURCE_DEFAULT, 2))
    return out
