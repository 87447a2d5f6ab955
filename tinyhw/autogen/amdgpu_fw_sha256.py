"""SHA-256 of the boot firmware files of Debian's firmware-amd-graphics (generated; do not edit).

Written by ``python -m tinyhw.autogen.genfwhash`` from the extracted package.
"""

PACKAGE = 'firmware-amd-graphics'
VERSION = '20230210-5'

SHA256: dict[str, str] = {
    'gc_10_3_6_me.bin': '8536bdca2024e2c2821d68b4b6b6802ec30be7846faeb9ef35f46cc523589e8b',
    'gc_10_3_6_mec.bin': '3bfe2eb08290d34107ac3224d3a4c0419442b7a61592fba5536dd68bb4126eee',
    'gc_10_3_6_pfp.bin': 'f0f1acf7a12cc03ad31105b621940c452cc6cf1e178ed511044a8906b12539cf',
    'gc_10_3_6_rlc.bin': '3cbb98f8574a6f5da2c48799881a4357a9969e204dcf58cdf4407094da4e7ca1',
    'gc_10_3_7_me.bin': 'e6af3f9a9226f749c707d5d12ddae53cd0371aabc892b3fc0e8ce2ef287e3ead',
    'gc_10_3_7_mec.bin': 'be9b6b1d627bd41a4e9e27fc8339ab0325c7f6b5e42487ed8d4a56e84b02a680',
    'gc_10_3_7_pfp.bin': 'b98652f90188fff4217514fba8cd72e6792a40e3c60f9af61ab59848f1866446',
    'gc_10_3_7_rlc.bin': '6a61dd067d81a9828b53aca78809e91edee1964b4b5fc4fccd6f3b62e57c784a',
    'gc_11_0_0_imu.bin': '2a5fd2c6f59b058b855998586640ac806b4c554bab9fb1b1978b1f8e60ed64e2',
    'gc_11_0_0_me.bin': 'df95b30c03f1725332655036c2800e5471b76467c50093ab52d5bface1dcf1ec',
    'gc_11_0_0_mec.bin': '74daa9af1046e4b4d7f902ecfd2397d2eb94c6f20be38969d62eefe0340665a7',
    'gc_11_0_0_pfp.bin': 'ef275f109937ee696e893729afbc396f441697c98d99fa6b97e8930faf48f82b',
    'gc_11_0_0_rlc.bin': 'cd0e4f5b5aa9458231b33c78adcb5bfb42014c14583e12639581c62b9074d06f',
    'gc_11_0_1_imu.bin': '728805abdc9b22a418ad55aa23028f80b46d9e85c3edc788ba8fa364052b1b7c',
    'gc_11_0_1_me.bin': '3137cd24743b539cfce034bafc3f5e01e07dca42c6c6d810f9c0fdbdb7959c01',
    'gc_11_0_1_mec.bin': '8c62b158e941f285a4a86f7bd3259e03d260c47a44919bfe0499ea3b70308701',
    'gc_11_0_1_pfp.bin': '71f3d8588b270d031bf398c59b4206d962b2dab6eb885bbbe5c736a0c39162b0',
    'gc_11_0_1_rlc.bin': '498731bf4cc6d305fbbeb10548aec8c76f418fb21a646d5a3a1e21685dde96cc',
    'gc_11_0_2_imu.bin': '88dba4a22c77109af8b7bb75d7a73c948549db38faa358feb8f85098a688ca2a',
    'gc_11_0_2_me.bin': '5af1eabb16ec6e65d5e61abb399fdde3ec751cde02af1bce9743428bac957c10',
    'gc_11_0_2_mec.bin': 'd791f3469d3da8bb94bee9e8a9670f3ab7d51bb52c3e9fa262d022669198b232',
    'gc_11_0_2_pfp.bin': '4b3f3dd404f3c4a55e39f4ca759cd55343ce1d0105fa705f383a29dc265813ea',
    'gc_11_0_2_rlc.bin': 'c7f3b354d67d131c21455cb22f56ac1dc7d8c06fad436b4dc57841147ae9f7bc',
    'psp_13_0_0_sos.bin': '0e585dd67c1c1a36076263b9d4f64033684af47005a90b7f34eb355fcfdcdfcf',
    'psp_13_0_7_sos.bin': 'ec293cd16f51bcc8728111e86b348b00843cd1907d9430f1f95c09898c01cbcb',
    'sdma_5_2_6.bin': 'eb3cfb72be20749616b58db20f92528861ffaeaf5c8a7d9a7236ed82d89de05b',
    'sdma_5_2_7.bin': 'b4550787d0971c71c9252180322312fb6468e19c63d147d8db2008fbc51afb5d',
    'sdma_6_0_0.bin': '6c0ee334cb4b71debe65eadd0da2537fab378fc552b736b53afe872703b5d414',
    'sdma_6_0_1.bin': 'b2814b404dcb0a41b677616b8d4e87783f250610e0bd3811aa3b798cf751fc30',
    'sdma_6_0_2.bin': '12eb0c1611bc93c1b57e1aaf37a1794bd41c176f21660a462821af6cf619e82a',
    'smu_13_0_0.bin': '892728fc9bbadde27637dc578730b0069f9d15ea00b74dfcbf84defc0caef5db',
    'smu_13_0_7.bin': '765fea4989675e619747cf3c6da9a53cb879f83ec73a1bf29e5d703c58fb23c6',
}
