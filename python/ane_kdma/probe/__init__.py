"""The probe kit: measure any ANE through Core ML, and get figures a chip folder can hold.

* :mod:`.design`: which 1x1 convolutions pin the model, sized for a chip;
* :mod:`.manifest`: the set's manifest, read strictly and checked against its packages;
* :mod:`.build`: ``probe make``, the ML Program packages (coremltools' MIL builder);
* :mod:`.runner`: ``probe run``, the timing with the timer injected (Core ML on a Mac);
* :mod:`.synthetic`: a chip with hidden parameters "measured" through the kit.

The packages are built anywhere; only the timing needs macOS. See docs/probe.md.
"""

from __future__ import annotations
