// launcher/hostfile.hpp: OpenMPI and DeepSpeed hostfiles, DeepSpeed's --include/--exclude,
// the text handed to mpirun, and every mistake as one line naming FILE:LINE and the problem.
#include "launcher/hostfile.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "common/fs.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"

namespace {

using gt::test::input_error_of;

class HostfileTest : public ::testing::Test {
 protected:
  gt::test::TempDir dir{"gt_hostfile"};
  std::string write(const std::string& text) { return dir.write("hosts.txt", text); }
  gt::Hostfile read(const std::string& text) { return gt::read_hostfile(write(text)); }
  // The error reading `text` gives, with the temp path shortened to FILE.
  std::string error_of(const std::string& text) {
    const std::string path = write(text);
    std::string e = input_error_of([&] { gt::read_hostfile(path); });
    if (e.rfind(path, 0) == 0) e = "FILE" + e.substr(path.size());
    return e;
  }
  gt::Hostfile two_by_four() { return read("a slots=4\nb slots=4\n"); }
};

TEST_F(HostfileTest, OpenMpiSyntaxWithCommentsAndBlankLines) {
  const gt::Hostfile hf = read("# cluster\n\nnode1 slots=2   # first\n  node2 slots=4 max_slots=8\nnode3\n");
  ASSERT_EQ(hf.hosts.size(), 3u);
  EXPECT_EQ(hf.hosts[0].name, "node1");
  EXPECT_EQ(hf.hosts[0].slots, 2);
  EXPECT_EQ(hf.hosts[0].max_slots, 0);
  EXPECT_EQ(hf.hosts[0].line, 3);
  EXPECT_EQ(hf.hosts[1].slots, 4);
  EXPECT_EQ(hf.hosts[1].max_slots, 8);
  EXPECT_EQ(hf.hosts[1].line, 4);
  EXPECT_EQ(hf.hosts[2].slots, 1);  // a bare host is one slot, as in OpenMPI
  EXPECT_EQ(hf.total_slots(), 7);
  EXPECT_EQ(hf.format, gt::Hostfile::kOpenMPI);
}

TEST_F(HostfileTest, DeepSpeedSyntaxIsRecognised) {
  const gt::Hostfile hf = read("worker-0 slots=4\nworker-1 slots=4\n");
  EXPECT_EQ(hf.format, gt::Hostfile::kDeepSpeed);
  EXPECT_EQ(hf.total_slots(), 8);
}

TEST_F(HostfileTest, MaxSlotsMakesItOpenMpiOnly) {
  EXPECT_EQ(read("a slots=2 max_slots=2\n").format, gt::Hostfile::kOpenMPI);
  EXPECT_EQ(read("a slots=2 max-slots=3\n").hosts[0].max_slots, 3);  // OpenMPI's other spelling
}

TEST_F(HostfileTest, CrLfTabsAndIpAddresses) {
  const gt::Hostfile hf = read("10.0.0.1\tslots=2\r\nlocalhost slots=1\r\n");
  ASSERT_EQ(hf.hosts.size(), 2u);
  EXPECT_EQ(hf.hosts[0].name, "10.0.0.1");
  EXPECT_EQ(hf.hosts[1].slots, 1);
}

TEST_F(HostfileTest, UnknownKeyword) {
  EXPECT_EQ(error_of("a slots=2\nb slot=2\n"),
            "FILE:2: unknown keyword 'slot' (a hostfile line is: HOST [slots=N] [max_slots=M])");
}

TEST_F(HostfileTest, SlotsMustBeAPositiveInteger) {
  for (const char* bad : {"0", "-1", "2.5", "", "two", "+2", "99999999999"})
    EXPECT_EQ(error_of(std::string("# x\na slots=") + bad + "\n"),
              std::string("FILE:2: slots must be an integer from 1 to 1048576, got '") + bad + "'")
        << bad;
}

TEST_F(HostfileTest, MaxSlotsBelowSlots) {
  EXPECT_EQ(error_of("a slots=4 max_slots=2\n"), "FILE:1: max_slots=2 is less than slots=4 for host 'a'");
}

TEST_F(HostfileTest, MaxSlotsMustBeAPositiveInteger) {
  EXPECT_EQ(error_of("a slots=1 max_slots=0\n"), "FILE:1: max_slots must be an integer from 1 to 1048576, got '0'");
}

TEST_F(HostfileTest, SlotsGivenTwice) {
  EXPECT_EQ(error_of("a slots=1 slots=2\n"), "FILE:1: slots= is given twice for host 'a'");
}

TEST_F(HostfileTest, DuplicateHost) {
  EXPECT_EQ(error_of("a slots=1\nb slots=1\n\na slots=2\n"), "FILE:4: host 'a' is already on line 1");
}

TEST_F(HostfileTest, HostNameWithASpace) {
  EXPECT_EQ(error_of("node a slots=2\n"),
            "FILE:1: unexpected 'a' after host 'node' (want slots=N or max_slots=N; a host name "
            "cannot contain spaces)");
}

TEST_F(HostfileTest, LineWithoutAHostName) {
  EXPECT_EQ(error_of("a\nslots=2\n"), "FILE:2: the line starts with 'slots=2'; the host name comes first");
}

TEST_F(HostfileTest, BadCharactersInHostNames) {
  EXPECT_EQ(error_of("user@node slots=2\n"),
            "FILE:1: host name 'user@node' has '@', which a host name cannot contain (letters, digits, '-', "
            "'_', '.')");
  EXPECT_EQ(error_of("a\nnode:1\n"),
            "FILE:2: host name 'node:1' has ':', which a host name cannot contain (letters, digits, '-', '_', "
            "'.')");
  EXPECT_EQ(error_of("node..x\n"), "FILE:1: host name 'node..x' has an empty part between dots");
  EXPECT_EQ(error_of("-node\n"), "FILE:1: host name '-node' has a part that starts or ends with '-'");
}

TEST_F(HostfileTest, EmptyFileAndCommentsOnly) {
  EXPECT_EQ(error_of(""), "FILE: the hostfile names no hosts (every line is blank or a comment)");
  EXPECT_EQ(error_of("# nothing\n\n   \n"), "FILE: the hostfile names no hosts (every line is blank or a comment)");
}

TEST_F(HostfileTest, MissingFile) {
  const std::string path = dir.file("absent.txt");
  EXPECT_EQ(input_error_of([&] { gt::read_hostfile(path); }),
            path + ": cannot read the hostfile (No such file or directory)");
}

TEST_F(HostfileTest, DirectoryIsNotAHostfile) {
  const std::string e = input_error_of([&] { gt::read_hostfile(dir.path); });
  EXPECT_EQ(e, dir.path + ": cannot read the hostfile (Is a directory)");
}

TEST_F(HostfileTest, IncludeWholeHostsKeepsHostfileOrder) {
  const gt::Hostfile hf = read("a slots=2\nb slots=3\nc slots=4\n");
  const gt::Hostfile f = gt::filter_hosts(hf, "c@a", "");
  ASSERT_EQ(f.hosts.size(), 2u);
  EXPECT_EQ(f.hosts[0].name, "a");
  EXPECT_EQ(f.hosts[1].name, "c");
  EXPECT_EQ(f.total_slots(), 6);
  EXPECT_TRUE(f.hosts[1].slot_ids.empty());
  EXPECT_EQ(gt::device_ids(f.hosts[1]), (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(HostfileTest, IncludeSlotList) {
  const gt::Hostfile f = gt::filter_hosts(two_by_four(), "a@b:2,0", "");
  ASSERT_EQ(f.hosts.size(), 2u);
  EXPECT_EQ(f.hosts[0].slots, 4);
  EXPECT_EQ(f.hosts[1].slots, 2);
  EXPECT_EQ(f.hosts[1].slot_ids, (std::vector<int>{0, 2}));
  EXPECT_EQ(f.hosts[1].max_slots, 2);  // no oversubscribing onto the GPUs left out
  EXPECT_EQ(f.total_slots(), 6);
}

TEST_F(HostfileTest, ExcludeWholeHostAndSlots) {
  const gt::Hostfile hf = read("a slots=4\nb slots=4\nc slots=1\n");
  const gt::Hostfile f = gt::filter_hosts(hf, "", "a@b:1,3");
  ASSERT_EQ(f.hosts.size(), 2u);
  EXPECT_EQ(f.hosts[0].name, "b");
  EXPECT_EQ(f.hosts[0].slot_ids, (std::vector<int>{0, 2}));
  EXPECT_EQ(f.hosts[1].name, "c");
  EXPECT_EQ(f.total_slots(), 3);
}

TEST_F(HostfileTest, ExcludingEverySlotOfAHostDropsIt) {
  const gt::Hostfile f = gt::filter_hosts(read("a slots=2\nb slots=2\n"), "", "a:0,1");
  ASSERT_EQ(f.hosts.size(), 1u);
  EXPECT_EQ(f.hosts[0].name, "b");
}

TEST_F(HostfileTest, ExcludingEverythingIsAnError) {
  const gt::Hostfile hf = read("a slots=2\n");
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "", "a"); }),
            "--exclude: 'a' leaves no slots in " + hf.path);
}

TEST_F(HostfileTest, IncludeAndExcludeTogether) {
  const gt::Hostfile hf = two_by_four();
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "a", "b"); }),
            "--include/--exclude: give one of them, not both (DeepSpeed does not allow both either)");
}

TEST_F(HostfileTest, NoFilterReturnsTheHostfile) {
  const gt::Hostfile f = gt::filter_hosts(two_by_four(), "", "");
  EXPECT_EQ(f.hosts.size(), 2u);
  EXPECT_EQ(f.total_slots(), 8);
}

TEST_F(HostfileTest, UnknownHostInAFilter) {
  const gt::Hostfile hf = two_by_four();
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "a@node9", ""); }),
            "--include: unknown host 'node9' (the hostfile has a, b)");
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "", "node9:0"); }),
            "--exclude: unknown host 'node9' (the hostfile has a, b)");
}

TEST_F(HostfileTest, SlotIndexOutOfRange) {
  const gt::Hostfile hf = two_by_four();
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "b:1,4", ""); }),
            "--include: host 'b' has no slot 4 (it has slots 0..3)");
}

TEST_F(HostfileTest, MalformedFilters) {
  const gt::Hostfile hf = two_by_four();
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "a@@b", ""); }),
            "--include: empty host in 'a@@b' (hosts are separated by one '@')");
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "a:x", ""); }),
            "--include: host 'a': slot 'x' is not a slot index (want e.g. a:0,1)");
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "a:", ""); }),
            "--include: host 'a': slot '' is not a slot index (want e.g. a:0,1)");
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "a:1,1", ""); }),
            "--include: host 'a': slot 1 is named twice");
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(hf, "a@b@a", ""); }),
            "--include: host 'a' is named twice in 'a@b@a'");
}

TEST_F(HostfileTest, FiltersCompose) {
  // Slot numbers stay device numbers: after keeping 1,3 of a, "a:3" means device 3.
  const gt::Hostfile once = gt::filter_hosts(two_by_four(), "a:1,3", "");
  const gt::Hostfile twice = gt::filter_hosts(once, "", "a:3");
  ASSERT_EQ(twice.hosts.size(), 1u);
  EXPECT_EQ(twice.hosts[0].slot_ids, (std::vector<int>{1}));
  EXPECT_EQ(input_error_of([&] { gt::filter_hosts(once, "a:0", ""); }),
            "--include: host 'a' has no slot 0 (it has slots 1, 3)");
}

TEST_F(HostfileTest, OpenMpiHostfileTextRoundTrips) {
  const gt::Hostfile hf = read("a slots=2 max_slots=4\nb\nc slots=4\n");
  const gt::Hostfile f = gt::filter_hosts(hf, "a@c:1,2", "");
  const std::string text = gt::openmpi_hostfile_text(f);
  EXPECT_EQ(text, "# written by graphtune from " + hf.path + "\na slots=2 max_slots=4\nc slots=2 max_slots=2\n");
  const gt::Hostfile back = gt::read_hostfile(dir.write("for_mpirun.txt", text));
  ASSERT_EQ(back.hosts.size(), 2u);
  EXPECT_EQ(back.total_slots(), 4);
  EXPECT_EQ(back.hosts[1].max_slots, 2);
}

TEST_F(HostfileTest, CheckFits) {
  const gt::Hostfile hf = read("a slots=2\nb slots=2\n");
  EXPECT_EQ(input_error_of([&] { gt::check_fits(hf, 4, "--np"); }), "(no error)");
  EXPECT_EQ(input_error_of([&] { gt::check_fits(hf, 1, "--np"); }), "(no error)");
  EXPECT_EQ(input_error_of([&] { gt::check_fits(hf, 5, "--np"); }),
            "--np 5: the hostfile " + hf.path + " has 4 slots (a: 2, b: 2)");
  EXPECT_EQ(input_error_of([&] { gt::check_fits(hf, 0, "--np"); }), "--np 0: a job needs at least 1 rank");
  EXPECT_EQ(input_error_of([&] { gt::check_fits(hf, -3, "--np"); }), "--np -3: a job needs at least 1 rank");
}

TEST_F(HostfileTest, CheckFitsAfterAFilter) {
  const gt::Hostfile f = gt::filter_hosts(two_by_four(), "", "b:0,1,2");
  EXPECT_EQ(input_error_of([&] { gt::check_fits(f, 6, "--np"); }),
            "--np 6: the hostfile " + f.path + " has 5 slots (a: 4, b: 1)");
}

TEST(IsLocalHost, LoopbackAndThisMachine) {
  EXPECT_TRUE(gt::is_local_host("localhost"));
  EXPECT_TRUE(gt::is_local_host("127.0.0.1"));
  EXPECT_TRUE(gt::is_local_host("127.0.0.2"));
  EXPECT_TRUE(gt::is_local_host("::1"));
  char own[256] = {};
  ASSERT_EQ(gethostname(own, sizeof own - 1), 0);
  EXPECT_TRUE(gt::is_local_host(own));
}

TEST(IsLocalHost, OtherHosts) {
  EXPECT_FALSE(gt::is_local_host("node-that-is-not-here-1"));
  EXPECT_FALSE(gt::is_local_host("128.0.0.1"));
  EXPECT_FALSE(gt::is_local_host("192.0.2.254"));  // TEST-NET-1: documentation only, never ours
  EXPECT_FALSE(gt::is_local_host(""));
}

// Every hostfile shipped in hostfiles/ parses (the sbatch script is not a hostfile).
TEST(ShippedHostfiles, AllParse) {
  const char* source = std::getenv("GRAPHTUNE_SOURCE_DIR");
  const std::string folder = std::string(source ? source : ".") + "/hostfiles";
  ASSERT_TRUE(gt::is_directory(folder)) << folder;
  int parsed = 0;
  for (const std::string& name : gt::list_dir(folder)) {
    if (!gt::ends_with(name, ".txt")) continue;
    const std::string e = gt::test::input_error_of([&] {
      const gt::Hostfile hf = gt::read_hostfile(folder + "/" + name);
      EXPECT_GT(hf.total_slots(), 0) << name;
    });
    EXPECT_EQ(e, "(no error)") << name;
    ++parsed;
  }
  EXPECT_GE(parsed, 3);
  const gt::Hostfile two = gt::read_hostfile(folder + "/two_nodes.txt");
  EXPECT_EQ(two.hosts.size(), 2u);
  EXPECT_EQ(two.total_slots(), 4);
  const gt::Hostfile ds = gt::read_hostfile(folder + "/deepspeed.txt");
  EXPECT_EQ(ds.format, gt::Hostfile::kDeepSpeed);
  EXPECT_EQ(gt::filter_hosts(ds, "worker-0@worker-1:0,2", "").total_slots(), 6);
}

}  // namespace

namespace {

TEST(HostfileText, ReadsWhatTheFileReaderReadsAndNamesTheGivenPath) {
  const gt::Hostfile hf = gt::read_hostfile_text("# c\na slots=2\nb slots=4 max_slots=8\n", "given.txt");
  ASSERT_EQ(hf.hosts.size(), 2u);
  EXPECT_EQ(hf.path, "given.txt");
  EXPECT_EQ(hf.total_slots(), 6);
  EXPECT_EQ(hf.format, gt::Hostfile::kOpenMPI);
  EXPECT_EQ(input_error_of([] { gt::read_hostfile_text("a slots=0\n", "given.txt"); }),
            "given.txt:1: slots must be an integer from 1 to 1048576, got '0'");
}

}  // namespace
