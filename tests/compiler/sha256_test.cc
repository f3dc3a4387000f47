#include "compiler/cache/sha256.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <system_error>

namespace openneuron::compiler {
namespace {

TEST(Sha256Test, FipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 448 bits: the padding no longer fits in the message's last block.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                       "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256Test, MillionAOneShotAndStreamed) {
  const std::string expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  const std::string a(1000000, 'a');
  EXPECT_EQ(sha256_hex(a), expected);
  // Odd chunk sizes cross block boundaries in every phase.
  Sha256 h;
  size_t done = 0;
  for (size_t chunk = 1; done < a.size(); chunk = chunk * 7 % 997 + 1) {
    const size_t n = std::min(chunk, a.size() - done);
    h.update(a.data() + done, n);
    done += n;
  }
  EXPECT_EQ(h.hex_digest(), expected);
}

TEST(Sha256Test, PaddingBoundaries) {
  // Reference values from Python's hashlib.
  const std::pair<size_t, const char*> cases[] = {
      {55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
      {56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
      {63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2"},
      {64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
      {65, "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9"},
      {119, "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c"},
      {120, "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98"},
  };
  for (const auto& [n, hex] : cases) EXPECT_EQ(sha256_hex(std::string(n, 'x')), hex) << n;
}

TEST(Sha256Test, DigestDoesNotConsumeState) {
  Sha256 h;
  h.update("ab");
  EXPECT_EQ(h.hex_digest(), sha256_hex("ab"));
  h.update("c");
  EXPECT_EQ(h.hex_digest(), sha256_hex("abc"));
}

TEST(Sha256Test, FileHashAndReadError) {
  char path[] = "/tmp/sha256_test_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string data(100000, 'q');
  ASSERT_EQ(write(fd, data.data(), data.size()), ssize_t(data.size()));
  close(fd);
  EXPECT_EQ(sha256_file_hex(path), sha256_hex(data));
  std::remove(path);
  try {
    sha256_file_hex(path);
    FAIL() << "expected a read error";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_EQ(e.code().value(), ENOENT);
  }
}

}  // namespace
}  // namespace openneuron::compiler
