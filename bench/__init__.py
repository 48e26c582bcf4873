"""`make bench`: cluster-up.yml timed against `ray up` and a manual SSH sequence."""
