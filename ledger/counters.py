"""What each GPU counter measures, written once: the importers keep the counter's name as printed,
the read side turns counters into metrics of one quantity kind (``ledger.kinds.KINDS``), and values of
two kinds never mix (R1, R13, R14).

``DMON``: the columns of ``nvidia-smi dmon``; ``stem`` and ``unit`` name the per-card metrics the read
side offers (``{stem}_mean``, ``{stem}_max``, in the unit dmon's units line prints), None where the
ledger offers no metric. ``TELEMETRY_MEANING``: ``nvidia-smi --query-gpu`` fields and ``dcgmi dmon``
short names.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DMON", "POWER_COUNTERS", "kind_of", "meaning_of"]


@dataclass(frozen=True)
class Counter:
    meaning: str
    kind: str
    stem: str | None = None  # the read side's metric stem, if it offers one
    unit: str | None = None  # the unit dmon prints for it


DMON: dict[str, Counter] = {
    "pwr": Counter(
        "board power draw of the card at the sample (W); one card, one instant (R14)", "power", "power_w", "W"
    ),
    "gtemp": Counter("GPU die temperature (C)", "temperature", "gpu_temp_c", "C"),
    "mtemp": Counter(
        "HBM/memory temperature (C); '-' on cards without a memory sensor", "temperature", "memory_temp_c", "C"
    ),
    "sm": Counter(
        "share of the sample period in which at least one kernel was running on the GPU: activity time, NOT SM occupancy, SM active, tensor-core utilisation or MFU (R13)",
        "activity_time_percent",
        "gpu_activity_time_pct",
        "%",
    ),
    "mem": Counter(
        "share of the sample period in which device memory was being read or written (memory controller busy time), NOT memory bandwidth utilisation (R13)",
        "memory_busy_percent",
        "memory_busy_pct",
        "%",
    ),
    "enc": Counter("share of time the video encoder was busy (%)", "utilization_percent", "encoder_busy_pct", "%"),
    "dec": Counter("share of time the video decoder was busy (%)", "utilization_percent", "decoder_busy_pct", "%"),
    "jpg": Counter("share of time the JPEG decoder was busy (%)", "utilization_percent", "jpeg_busy_pct", "%"),
    "ofa": Counter(
        "share of time the optical flow accelerator was busy (%)", "utilization_percent", "ofa_busy_pct", "%"
    ),
    "fb": Counter(
        "frame buffer (device) memory in use, in the unit the units line prints (MB); a device memory figure, not a model allocation nor a weights file size (R1)",
        "device_memory",
        "fb_memory_used",
        "MB",
    ),
    "bar1": Counter(
        "BAR1 (host-mapped) memory in use, unit as printed (MB)", "device_memory", "bar1_memory_used", "MB"
    ),
    "ccpm": Counter("confidential-compute protected memory in use, unit as printed (MB)", "device_memory"),
    "rxpci": Counter("PCIe receive throughput (MB/s)", "bandwidth", "pcie_rx", "MB/s"),
    "txpci": Counter("PCIe transmit throughput (MB/s)", "bandwidth", "pcie_tx", "MB/s"),
    "mclk": Counter("memory clock (MHz)", "clock_frequency", "memory_clock_mhz", "MHz"),
    "pclk": Counter("graphics/processor clock (MHz)", "clock_frequency", "gpu_clock_mhz", "MHz"),
    "pviol": Counter("share of time clocks were held down by the power limit (%)", "ratio"),
    "tviol": Counter("thermal violation: clocks held down by temperature (flag or %, as printed)", "other"),
    "sbecc": Counter("single-bit ECC errors in the interval (count)", "count"),
    "dbecc": Counter("double-bit ECC errors in the interval (count)", "count"),
    "pci": Counter("PCIe replay errors in the interval (count)", "count"),
}

# nvidia-smi --query-gpu fields and dcgmi dmon field short names: what each measures (R13, R14).
TELEMETRY_MEANING: dict[str, str] = {
    "utilization.gpu": "share of the sample period in which a kernel ran on the GPU: activity time, NOT SM occupancy nor MFU (R13)",
    "utilization.memory": "share of the sample period in which device memory was read or written: memory controller busy time, NOT bandwidth utilisation (R13)",
    "power.draw": "board power as the driver reports it (averaged over the driver's window on current drivers); not power.draw.instant (R14)",
    "power.draw.instant": "board power at one instant (R14)",
    "power.draw.average": "board power averaged by the driver over its window (R14)",
    "memory.used": "device memory in use, as the driver reports it (R1)",
    "GPUTL": "DCGM field 203, GPU utilisation: activity time, like nvidia-smi utilization.gpu (R13)",
    "MCUTL": "DCGM field 204, memory copy utilisation: memory controller busy time (R13)",
    "POWER": "DCGM field 155, power usage (R14: one card, one sample)",
    "TOTEC": "DCGM field 156, total energy consumption since the driver loaded",
    "TMPTR": "DCGM field 150, GPU temperature",
    "MMTMP": "DCGM field 140, memory temperature",
    "FBUSD": "DCGM field 252, frame buffer memory used",
    "FBFRE": "DCGM field 251, frame buffer memory free",
    "FBTTL": "DCGM field 250, frame buffer memory total",
    "ESVTL": "DCGM field 310, ECC single-bit errors, volatile total",
    "EDVTL": "DCGM field 311, ECC double-bit errors, volatile total",
    "SMCLK": "DCGM field 100, SM clock",
    "MMCLK": "DCGM field 101, memory clock",
    "SMACT": "DCGM field 1002, SM active (profiling): not the same as GPUTL (R13)",
    "SMOCC": "DCGM field 1003, SM occupancy (profiling)",
    "TENSO": "DCGM field 1004, tensor pipe active (profiling)",
    "DRAMA": "DCGM field 1005, DRAM active (profiling)",
    "PCITX": "DCGM field 1009, PCIe transmit bytes (profiling)",
    "PCIRX": "DCGM field 1010, PCIe receive bytes (profiling)",
}

# Quantity kind of each nvidia-smi / dcgmi field (R1, R13, R14); a field not listed is "other".
TELEMETRY_KIND: dict[str, str] = {
    "utilization.gpu": "activity_time_percent",
    "GPUTL": "activity_time_percent",
    "utilization.memory": "memory_busy_percent",
    "MCUTL": "memory_busy_percent",
    "power.draw": "power",
    "power.draw.average": "power",
    "power.draw.instant": "power",
    "POWER": "power",
    "memory.used": "device_memory",
    "memory.free": "device_memory",
    "memory.total": "device_memory",
    "FBUSD": "device_memory",
    "FBFRE": "device_memory",
    "FBTTL": "device_memory",
    "temperature.gpu": "temperature",
    "temperature.memory": "temperature",
    "TMPTR": "temperature",
    "MMTMP": "temperature",
    "clocks.sm": "clock_frequency",
    "clocks.mem": "clock_frequency",
    "clocks.gr": "clock_frequency",
    "SMCLK": "clock_frequency",
    "MMCLK": "clock_frequency",
    "ESVTL": "count",
    "EDVTL": "count",
}

# Every power counter the hardware importers write. Each is its own counter: average and
# instantaneous power are different quantities, never substituted or combined (R14).
POWER_COUNTERS: tuple[str, ...] = ("pwr", "power.draw", "power.draw.average", "power.draw.instant", "POWER")


def kind_of(counter: str) -> str:
    """The quantity kind of a counter as an importer named it (dmon column or telemetry field)."""
    if counter in DMON:
        return DMON[counter].kind
    return TELEMETRY_KIND.get(counter, "other")


def meaning_of(counter: str) -> str | None:
    """What a counter measures, or None for a field the ledger does not describe."""
    if counter in DMON:
        return DMON[counter].meaning
    return TELEMETRY_MEANING.get(counter)
