from ledger.main import entry

entry()
