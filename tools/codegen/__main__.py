import sys

from tools.codegen.generate import main

sys.exit(main())
