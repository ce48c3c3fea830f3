"""The coverage subscriber: samples every checked run into the covermodel bins."""

from __future__ import annotations

from pyuvm import ConfigDB, uvm_subscriber

from .covermodel import Coverage, RunSummary


class KdmaCoverage(uvm_subscriber):
    """Samples every checked run into covermodel bins; an illegal hit fails at once."""

    def build_phase(self) -> None:
        bfm = ConfigDB().get(self, "", "BFM")
        knobs = ConfigDB().get(self, "", "KNOBS")
        self.path: str | None = ConfigDB().get(self, "", "COVERAGE_JSON")
        self.cov = Coverage.for_build(bfm.hyp, knobs.k_max, bfm.ncores, bfm.geometry.ring_lines)

    def write(self, run: RunSummary) -> None:
        bad = self.cov.sample(run)
        if bad:
            raise AssertionError(
                f"[coverage:illegal] {', '.join(bad)} under hypothesis {self.cov.hyp.name} "
                f"(run {run.tasks[0][0]} lines)"
            )

    def extract_phase(self) -> None:
        self.logger.info("\n%s", self.cov.report())
        if self.path:
            with open(self.path, "w") as fh:
                fh.write(self.cov.to_json())

    def check_phase(self) -> None:
        missed = self.cov.missed()
        if missed:
            raise AssertionError(f"[coverage:missed] {len(missed)} bins: {', '.join(missed)}")
