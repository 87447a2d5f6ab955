"""The /proc/net/tcp{,6} peer lookup of `serve serprog` (issue 21 item 3), from text fixtures in the kernel's format."""

from __future__ import annotations

from tinyhw.formats.procnet import parse_table, socket_uid

HEADER = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")


def line(n: int, local: str, remote: str, state: str, uid: int) -> str:
    return (f"{n:4d}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000 {uid:5d}        0 "
            f"{5000 + n} 1 0000000000000000 20 4 30 10 -1\n")


# 127.0.0.1 on a little-endian machine; server on 7789 (0x1E6D), client on 41410 (0xA1C2)
SERVER, CLIENT = "0100007F:1E6D", "0100007F:A1C2"
TCP = (HEADER
       + line(0, SERVER, "00000000:0000", "0A", 1000)  # the listener
       + line(1, SERVER, CLIENT, "01", 1000)  # the server's accepted socket (its own uid)
       + line(2, CLIENT, SERVER, "01", 1001)  # the client's socket: this is the answer
       + line(3, "0100007F:A1C3", SERVER, "06", 0))  # a closed connection in TIME_WAIT (uid column 0)


def test_the_client_entry_is_the_one_whose_local_end_is_the_client() -> None:
    assert socket_uid(TCP, local=("127.0.0.1", 41410), remote=("127.0.0.1", 7789), byteorder="little") == 1001
    # the mirror image is the server's own socket
    assert socket_uid(TCP, local=("127.0.0.1", 7789), remote=("127.0.0.1", 41410), byteorder="little") == 1000


def test_no_entry_time_wait_and_listen_entries_are_not_answers() -> None:
    assert socket_uid(TCP, local=("127.0.0.1", 41411), remote=("127.0.0.1", 7789), byteorder="little") is None
    assert socket_uid(TCP, local=("127.0.0.1", 41419), remote=("127.0.0.1", 7789), byteorder="little") is None
    assert socket_uid(TCP, local=("127.0.0.1", 7789), remote=("0.0.0.0", 0), byteorder="little") is None
    assert socket_uid("", local=("127.0.0.1", 1), remote=("127.0.0.1", 2)) is None


def test_big_endian_machines_print_the_address_the_other_way_round() -> None:
    text = HEADER + line(0, "7F000001:A1C2", "7F000001:1E6D", "01", 77)
    assert socket_uid(text, local=("127.0.0.1", 41410), remote=("127.0.0.1", 7789), byteorder="big") == 77
    assert socket_uid(text, local=("127.0.0.1", 41410), remote=("127.0.0.1", 7789), byteorder="little") is None


def test_tcp6_loopback_and_ipv4_mapped_addresses() -> None:
    one = "00000000000000000000000001000000"  # ::1, four little-endian words
    mapped = "0000000000000000FFFF00000100007F"  # ::ffff:127.0.0.1
    text = HEADER + line(0, f"{one}:A1C2", f"{one}:1E6D", "01", 5) + line(1, f"{mapped}:B000", f"{mapped}:1E6D",
                                                                          "01", 6)
    assert socket_uid(text, local=("::1", 41410), remote=("::1", 7789), byteorder="little") == 5
    assert socket_uid(text, local=("::ffff:127.0.0.1", 0xB000), remote=("::ffff:127.0.0.1", 7789),
                      byteorder="little") == 6
    assert socket_uid(text, local=("127.0.0.1", 0xB000), remote=("127.0.0.1", 7789), byteorder="little") == 6


def test_two_owners_of_one_address_pair_is_no_answer_and_malformed_lines_are_skipped() -> None:
    text = TCP + line(9, CLIENT, SERVER, "08", 1002)  # a second, disagreeing entry (should not happen)
    assert socket_uid(text, local=("127.0.0.1", 41410), remote=("127.0.0.1", 7789), byteorder="little") is None
    junk = (HEADER + "   0: zz:zz 0100007F:1E6D 01 x x x 1000\n" + "garbage\n"
            + "   1: 0100007F:A1C2 0100007F:1E6D 01 00000000:00000000 00:00000000 00000000 notanuid 0 1\n"
            + line(2, CLIENT, SERVER, "01", 1001))
    assert len(parse_table(junk, "little")) == 1
    assert socket_uid(junk, local=("127.0.0.1", 41410), remote=("127.0.0.1", 7789), byteorder="little") == 1001

