#!/usr/bin/env python3
"""README.md's complete example is examples/readme_example.cpp, word for word."""
import re
import sys

readme, example = sys.argv[1], sys.argv[2]
block = re.search(r"```cpp\n(.*?)```", open(readme, encoding="utf-8").read(), re.S).group(1)
source = open(example, encoding="utf-8").read().split("\n", 1)[1]  # drop the comment line
if block != source:
    print("README.md's example and examples/readme_example.cpp differ")
    sys.exit(1)
print("README example in sync")
