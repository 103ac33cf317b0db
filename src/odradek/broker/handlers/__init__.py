"""One module per API, named by key; importing this package registers them all."""

import odradek.broker.handlers.k03_metadata
import odradek.broker.handlers.k18_api_versions
import odradek.broker.handlers.k19_create_topics
import odradek.broker.handlers.k20_delete_topics
import odradek.broker.handlers.k37_create_partitions  # noqa: F401
