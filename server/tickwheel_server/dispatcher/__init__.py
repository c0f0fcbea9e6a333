"""The dispatcher: partition ownership, claiming due occurrences, the claim plan."""
