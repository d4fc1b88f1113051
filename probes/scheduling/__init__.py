"""When and whether a slot runs: the dispatcher that claims due probes (`dispatch`), the
lateness budget a slot may start within (`lateness`), the slot ledger (`ledger`), the
caps a slot takes before its first request (`caps`) and worker heartbeats (`heartbeat`).
"""
