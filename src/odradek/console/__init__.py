"""``odradek console``: a web console for any Kafka-compatible cluster.

A separate process that speaks only the Kafka protocol (through
:mod:`odradek.client`), so it works against Apache Kafka as well as Odradek.
Pages are rendered on the server (aiohttp + Jinja2, autoescaped); the only
JavaScript is the message browser's live tail (an ``EventSource``). Charts
are inline SVG drawn from histories this process samples itself.
"""
