"""The notification scheduler: run_tick (tick) and its parts, by idea: the tick's context,
its lanes (lanes, rowlane, batchlane), the endpoint gate, delivery (deliver, mail), the
plan of each row's write-back, and the write-back itself. README: "The scheduler's inside"."""
