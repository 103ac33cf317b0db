"""The network wing: listeners, connections and the request pipeline."""
