"""The micro benchmark's command; its code is the package bench/micro/ (see driver.py).

python bench/micro.py --help
"""

import sys

from micro.driver import main

if __name__ == "__main__":
    sys.exit(main())
