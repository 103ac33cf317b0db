"""The control wing: the metadata image and log, the controller quorum, routing
to the controller, broker sessions."""
