import sys

from elastic.slurm.service import main

sys.exit(main())
