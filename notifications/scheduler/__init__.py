"""The notification scheduler: run_tick and its parts (outcomes, deliver, plan, writeback)."""
