"""When and whether a slot runs: the dispatcher that claims due probes (`dispatch`), the
lateness budget a slot may start within (`lateness`), the slot ledger (`ledger`), the
caps a slot takes before its first request (`caps`), waiting in turn for a full cap
(`waiting`), worker heartbeats (`heartbeat`), and the capacity planner that spreads probes
sharing a cap (`planner`, its plain core; `capacity`, the plan from the database).
"""
