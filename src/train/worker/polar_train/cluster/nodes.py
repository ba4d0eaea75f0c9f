"""What the node launchers (srun_torchrun, ray_torchrun) share: this node's interface for an address, and
the `polar train` command line of one node of a run across nodes (polar train's --nnodes, --node-rank,
--rdzv-endpoint, --local-addr, --socket-ifname: it starts torchrun with them, src/train/launch.ts)."""
import fcntl
import socket
import struct

SIOCGIFADDR = 0x8915  # linux/sockios.h: an interface's IPv4 address


def interface_of(address: str):
    """The name of this machine's interface that holds `address` (IPv4), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _index, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on it
            if socket.inet_ntoa(packed[20:24]) == address:
                return name
    return None


def free_port(address: str) -> int:
    """A TCP port free on `address` now (the rendezvous store binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def train_argv(polar, train_args, nnodes: int, rank: int, endpoint: str, local_addr: str, ifname, run_id: str):
    """`polar train ARGS` as node `rank` of `nnodes`, meeting the others at `endpoint`."""
    return [*polar, "train", *train_args, "--nnodes", str(nnodes), "--node-rank", str(rank),
            "--rdzv-endpoint", endpoint, "--local-addr", local_addr, "--rdzv-id", run_id,
            *(["--socket-ifname", ifname] if ifname else [])]


def tail(text: str, lines: int = 8) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])
