import sys

from tinylit_learn.cli import main

sys.exit(main())
