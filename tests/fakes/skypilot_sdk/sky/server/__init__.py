"""sky.server, as far as the kit reaches into it."""
