import sys

from ledger.main import main

sys.exit(main())
